"""The embedded AWS: moto in server mode on loopback, behind the IAM guard,
provisioned from `template.yaml`.

:meth:`Emulator.provision` creates what the stack's functions need, each from
its template definition: the table (with GSI1, its stream and TTL), every
SQS queue (the stream functions' on-failure queues), the user pool with its
``custom:tenant_id`` schema, app client and ``admin`` group, the identity pool
(served by :mod:`local_stack.identity_pool`: its provider, authenticated role
and principal tags), and every IAM role (trust policy, inline policies,
policies attached by ``AWS::IAM::Policy``, SAM's generated function roles).
The user pool signs ID tokens (RS256) with a key generated at every start
(:mod:`local_stack.cognito`; moto's own key is public) and serves its public
half at ``/<pool id>/.well-known/jwks.json``.

The stack's own requests are signed with :data:`OPERATOR_CREDENTIALS` (the
emulated account's administrator, see :mod:`local_stack.guard`), never with
credentials from your environment, and always go to the emulator's endpoint.

The data perimeter has its own way in: a second listener,
:attr:`Emulator.endpoint_url`, stands for the stack's DynamoDB gateway
endpoint. Only the functions the template puts in its VPC are pointed at it
(:func:`local_stack.stack.lambda_environment`), and only DynamoDB answers
there, as only DynamoDB is routed through the gateway endpoint. Requests that
arrive through it carry ``aws:SourceVpce`` = the endpoint's id
(:data:`stack_model.template.LOCAL_VPC_ENDPOINT_ID`) for the guard; requests
to the main listener carry none, like requests from anywhere but the VPC.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from local_stack import cognito, identity_pool, moto_fixes
from local_stack.dynamodb_questions import TableKeys
from local_stack.guard import SOURCE_VPCE_ENVIRON, Guard, json_error
from local_stack.moto_fixes import MOTO_LOCK
from local_stack.roles import RoleDefinition, roles_from_template
from local_stack.sessions import Session
from local_stack.state import CLIENT_CONFIG, OPERATOR_CREDENTIALS, REGION
from stack_model.template import (
    LOCAL_VPC_ENDPOINT_ID,
    Resolver,
    local_resolver,
    table_definition,
    template,
)

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sts import STSClient

log = logging.getLogger("local_stack.emulator")


Control = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes] | None]


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
    resolver: Resolver
    # The tiers' usage plans (tier -> plan id), in the emulator's API Gateway.
    usage_plans: dict[str, str]
    # Every queue of the template, by logical id: (URL, ARN).
    queues: dict[str, tuple[str, str]]

    def queue_url(self, arn: str) -> str:
        """The URL of the template's queue with this ARN."""
        (url,) = [url for url, queue_arn in self.queues.values() if queue_arn == arn]
        return url


class Emulator:
    """moto server + guard on ``host:port`` (0: a free port)."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, control: Control | None = None, endpoint_port: int = 0
    ) -> None:
        self._host = host
        self._port = port
        self._endpoint_port = endpoint_port
        self._control = control
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._endpoint_server: BaseWSGIServer | None = None
        self._endpoint_thread: threading.Thread | None = None
        self.guard: Guard | None = None
        self.provisioned: Provisioned | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        moto_fixes.apply()
        # The pool provisioned below signs with it: a token is this start's or forged.
        cognito.new_signing_key()
        definition = table_definition()
        tables = {
            definition["TableName"]: TableKeys(
                name=definition["TableName"],
                partition_key=_hash_key(definition["KeySchema"]),
                index_partition_keys={
                    index["IndexName"]: _hash_key(index["KeySchema"])
                    for index in definition.get("GlobalSecondaryIndexes", [])
                },
            )
        }
        self.guard = Guard(DomainDispatcherApplication(create_backend_app), roles={}, tables=tables)
        self._server = make_server(self._host, self._port, self._app, threaded=True, request_handler=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="emulator", daemon=True)
        self._thread.start()
        self._endpoint_server = make_server(
            self._host, self._endpoint_port, self._endpoint_app, threaded=True, request_handler=_QuietHandler
        )
        self._endpoint_thread = threading.Thread(
            target=self._endpoint_server.serve_forever, name="emulator-vpc-endpoint", daemon=True
        )
        self._endpoint_thread.start()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self._control is not None:
            handled = self._control(environ, start_response)
            if handled is not None:
                return handled
        assert self.guard is not None
        # moto's backends are not thread-safe: one request at a time.
        with MOTO_LOCK:
            return self.guard(environ, start_response)

    def _endpoint_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The gateway endpoint: DynamoDB only, with the endpoint's id for the guard."""
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("DynamoDB_20120810."):
            # In AWS the VPC has no route to any other service: the call never arrives.
            status, headers, body = json_error(
                "UnreachableFromVpcException",
                "Only DynamoDB is reachable from the stack's VPC (its gateway endpoint); nothing else has a route.",
            )
            start_response(status, headers)
            return [body]
        environ[SOURCE_VPCE_ENVIRON] = LOCAL_VPC_ENDPOINT_ID
        return self._app(environ, start_response)

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
        keys = credentials or OPERATOR_CREDENTIALS
        session = boto3.Session(
            aws_access_key_id=keys["aws_access_key_id"],
            aws_secret_access_key=keys["aws_secret_access_key"],
            aws_session_token=keys.get("aws_session_token"),
            region_name=REGION,
        )
        return session.client(service, endpoint_url=self.url, config=CLIENT_CONFIG)  # type: ignore[call-overload]

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

    # ------------------------------------------------------------ provisioning
    def provision(self, parameters: Mapping[str, str] | None = None) -> Provisioned:
        """Create the template's table, queue, roles, user pool and usage plans,
        with the template's parameters (``parameters`` override their defaults)."""
        assert self.guard is not None, "start() first"
        resources = template()["Resources"]
        resolver = local_resolver(parameters)

        dynamodb: DynamoDBClient = self.client("dynamodb")
        definition = table_definition(resolver)
        table = dynamodb.create_table(**definition)["TableDescription"]
        table_props = resources["SupportTicketTable"]["Properties"]
        ttl = table_props.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(TableName=definition["TableName"], TimeToLiveSpecification=ttl)
        resolver.attributes["SupportTicketTable.Arn"] = table["TableArn"]
        resolver.attributes["SupportTicketTable.StreamArn"] = table.get("LatestStreamArn", "")

        sqs = self.client("sqs")
        queues: dict[str, tuple[str, str]] = {}
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::SQS::Queue":
                continue
            queue_url = sqs.create_queue(QueueName=logical_id)["QueueUrl"]
            attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
            queues[logical_id] = (queue_url, attributes["QueueArn"])
            resolver.refs[logical_id] = queue_url
            resolver.attributes[f"{logical_id}.Arn"] = attributes["QueueArn"]

        pool_id, client_id, group = self._provision_user_pool(resolver)
        resolver.refs["UserPool"] = pool_id
        resolver.refs["UserPoolClient"] = client_id
        provider_name = f"cognito-idp.{REGION}.amazonaws.com/{pool_id}"
        resolver.attributes["UserPool.ProviderName"] = provider_name
        resolver.refs["IdentityPool"] = self._provision_identity_pool(resolver)

        roles = roles_from_template(resolver)
        iam_client = self.client("iam")
        for role in roles.values():
            iam_client.create_role(RoleName=role.name, AssumeRolePolicyDocument=json.dumps(role.trust_policy))
            for name, document in role.inline_policies.items():
                iam_client.put_role_policy(RoleName=role.name, PolicyName=name, PolicyDocument=json.dumps(document))
        self.guard.roles = roles
        self.guard.identity_pool = identity_pool.from_template(
            resolver, resolver.refs["IdentityPool"], roles, identity_pool.user_pool_provider
        )
        usage_plans = self._provision_usage_plans(resolver)
        self.provisioned = Provisioned(
            table_name=definition["TableName"],
            table_arn=table["TableArn"],
            stream_arn=table.get("LatestStreamArn", ""),
            user_pool_id=pool_id,
            user_pool_client_id=client_id,
            user_pool_provider_name=provider_name,
            identity_pool_id=resolver.refs["IdentityPool"],
            admin_group=group,
            failure_queue_url=queues["AggregateCountsFailureQueue"][0],
            failure_queue_arn=queues["AggregateCountsFailureQueue"][1],
            roles=roles,
            resolver=resolver,
            usage_plans=usage_plans,
            queues=queues,
        )
        return self.provisioned

    def _provision_usage_plans(self, resolver: Resolver) -> dict[str, str]:
        """The tiers' usage plans (``UsagePlan<Tier>``), with the template's
        throttle and quota, in moto's API Gateway (without ``ApiStages``: the
        emulator holds no REST API; the local gateway is the API)."""
        client: Any = self.client("apigateway")
        plans: dict[str, str] = {}
        for logical_id, resource in template()["Resources"].items():
            if resource["Type"] != "AWS::ApiGateway::UsagePlan":
                continue
            tier = usage_plan_tier(logical_id)
            props = resolver.resolve({k: v for k, v in resource["Properties"].items() if k != "ApiStages"})
            throttle, quota = props.get("Throttle", {}), props.get("Quota", {})
            created = client.create_usage_plan(
                name=props.get("UsagePlanName", logical_id),
                description=props.get("Description", ""),
                throttle={"rateLimit": float(throttle["RateLimit"]), "burstLimit": int(throttle["BurstLimit"])},
                quota={"limit": int(quota["Limit"]), "period": quota.get("Period", "DAY")},
                tags={"tier": tier},
            )
            plans[tier] = created["id"]
        return plans

    def _provision_identity_pool(self, resolver: Resolver) -> str:
        """The identity pool in moto (so the operator can describe it); the
        guard answers its token exchanges (:mod:`local_stack.identity_pool`)."""
        (props,) = [
            resolver.resolve(res["Properties"])
            for res in template()["Resources"].values()
            if res["Type"] == "AWS::Cognito::IdentityPool"
        ]
        client: CognitoIdentityClient = self.client("cognito-identity")
        created = client.create_identity_pool(
            IdentityPoolName=props["IdentityPoolName"],
            AllowUnauthenticatedIdentities=bool(props.get("AllowUnauthenticatedIdentities")),
            AllowClassicFlow=bool(props.get("AllowClassicFlow")),
            CognitoIdentityProviders=props.get("CognitoIdentityProviders", []),
        )
        return created["IdentityPoolId"]

    def _provision_user_pool(self, resolver: Resolver) -> tuple[str, str, str]:
        resources = template()["Resources"]
        cognito: CognitoIdentityProviderClient = self.client("cognito-idp")
        pool_props = resolver.resolve(resources["UserPool"]["Properties"])
        pool_props["PoolName"] = pool_props.pop("UserPoolName")
        pool_id = cognito.create_user_pool(**pool_props)["UserPool"]["Id"]
        client_props = resolver.resolve(
            {k: v for k, v in resources["UserPoolClient"]["Properties"].items() if k != "UserPoolId"}
        )
        client_id = cognito.create_user_pool_client(UserPoolId=pool_id, **client_props)["UserPoolClient"]["ClientId"]
        groups = [res for res in resources.values() if res["Type"] == "AWS::Cognito::UserPoolGroup"]
        for group in groups:
            props = {k: v for k, v in group["Properties"].items() if k != "UserPoolId"}
            cognito.create_group(UserPoolId=pool_id, **resolver.resolve(props))
        admin = next((g["Properties"]["GroupName"] for g in groups if g["Properties"]["GroupName"] == "admin"), "admin")
        return pool_id, client_id, admin


USAGE_PLAN_PREFIX = "UsagePlan"


def usage_plan_tier(logical_id: str) -> str:
    """``UsagePlanPremium`` -> ``premium`` (the template names a tier's plan so)."""
    if not logical_id.startswith(USAGE_PLAN_PREFIX) or logical_id == USAGE_PLAN_PREFIX:
        raise ValueError(f"{logical_id}: usage plans are named UsagePlan<Tier>")
    return logical_id[len(USAGE_PLAN_PREFIX) :].lower()


def _hash_key(key_schema: list[dict[str, str]]) -> str:
    return next(key["AttributeName"] for key in key_schema if key["KeyType"] == "HASH")
