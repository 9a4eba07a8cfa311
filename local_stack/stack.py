"""The whole system on one machine: emulator + guard, API Gateway, functions,
stream poller, all from `template.yaml`. ``make dev`` runs :class:`LocalStack`.

A dedicated tenant's table (``templates/dedicated-table.yaml``) is deployed
into a running stack with :meth:`LocalStack.deploy_dedicated` (``POST
/_local/dedicated?tenant=<t>``, what ``python -m ops.dedicated --local``
calls): the emulator makes it, and its stream gets a poller per mapping of
the template, feeding the same functions with the same filters. Offboarding
removes it with :meth:`LocalStack.remove_dedicated` (``DELETE
/_local/dedicated?tenant=<t>&waiting_days=<n>``): its pollers stop, the table
is deleted and its key's deletion scheduled.

While it runs, ``<state dir>/stack.json`` tells other commands (``make token``,
``make onboard``, tests, benchmarks) where everything is,
``<state dir>/env.json`` is an ``--env-vars`` file for ``sam local``, and
``<state dir>/events/`` holds the sample events of ``events/`` with fresh
tokens of the demo users (``make events`` refreshes them: a token lives an
hour). All are removed on stop.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import os
import secrets
import shutil
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

from local_stack.apigateway.rest_api import (
    Gateway,
    GatewayResponses,
    LambdaAuthorizer,
    authorizer_spec,
    routes_from_specs,
)
from local_stack.apigateway.usage_plans import KeyDirectory, UsageMeter
from local_stack.emulator.server import SHUTDOWN_POLL_S, DedicatedTable, Emulator, Provisioned
from local_stack.event_sources.log_subscriptions import LogDelivery, subscriptions_from_template
from local_stack.event_sources.sqs_poller import SqsPoller, SqsSource, advance_queue_clock, sqs_sources
from local_stack.event_sources.stream_poller import StreamPoller, failure_message
from local_stack.event_sources.stream_sources import (
    StreamSource,
    dedicated_stream_sources,
    stream_functions,
    stream_source,
)
from local_stack.iam.dynamodb_authorization import table_name
from local_stack.lambda_.environments import FunctionEnvironments, LogSink
from local_stack.local_values import LOCAL_API_ID, local_environment, stack_port_environment
from local_stack.running_stack import (
    CONTROL_TOKEN_HEADER,
    DEFAULT_STATE_DIR,
    ENV_FILE,
    EVENTS_DIR,
    OPERATOR_CREDENTIALS,
    REGION,
    STATE_FILE,
    emulator_client,
    read_state,
    write_json,
)
from ops import sample_events
from ops.users import UserPool, ensure_user, id_token, tenant_credentials
from stack_model.functions import FunctionSpec, function_specs
from stack_model.roles import function_role
from support_tickets.core.identity import TenantCredentials
from support_tickets.core.keys import validate_tenant_id

log = logging.getLogger("local_stack")

DEMO_TENANTS = {"acme": ("alice", "ada"), "globex": ("bob", "bea")}
# The emulator tells a table's stream pollers of every write to it (they read the stream
# at once), and a drain answers from a poller waiting for one: between writes they only
# check this often, not four times a second (three requests a check, for each function
# of each table: a session's stack holds a table per dedicated tenant it made).
IDLE_POLL_INTERVAL_S = 30.0
DEFAULT_ENVIRONMENTS_PER_FUNCTION = 1
# Concurrent invocations of an SQS event source (and environments of its function)
# when its MaximumConcurrency is higher or unset: each is a process here.
DEFAULT_QUEUE_CONCURRENCY = 4


class _QuietHandler(WSGIRequestHandler):
    """The gateway logs its own line per request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


class _ApiServer(ThreadedWSGIServer):
    """Binds its port when created (so that the state file can name it) but
    listens only when :meth:`listen` is called: until the stack is ready, a
    client connecting to the port is refused, instead of being served by a stack
    whose ``make token`` does not work yet."""

    def server_activate(self) -> None:
        return

    def listen(self) -> None:
        super().server_activate()


# ---------------------------------------------------------------- functions
class FunctionRuntime:
    """Runs the template's functions as Lambda does: each in execution
    environments of its own (:mod:`local_stack.lambda_.environments`: a process per
    environment, started on the function's first invocation, its cold start),
    with its template environment (Globals merged) plus what Lambda adds:
    region, function name, memory size, and the credentials of the function's
    execution role in the emulator. A function's module state (the shared
    layer's caches, ``os.environ``, ``sys.modules``, Powertools' metrics and
    log keys) is its own, so one function can never send with a client another
    one built, nor hide a permission its own role lacks. Its ``Timeout`` is
    enforced; a crashed or timed-out environment is replaced.

    Functions run concurrently; each environment serves one invocation at a
    time, and a function gets up to ``max_environments`` of them under
    concurrent load (:data:`DEFAULT_ENVIRONMENTS_PER_FUNCTION` unless the stack
    is told otherwise; ``limits`` per function: an SQS-triggered function gets
    as many as its event sources' concurrency, so its message groups run in
    parallel).
    """

    def __init__(
        self,
        specs: dict[str, FunctionSpec],
        environments: dict[str, dict[str, str]],
        *,
        max_environments: int = DEFAULT_ENVIRONMENTS_PER_FUNCTION,
        limits: dict[str, int] | None = None,
        log_sink: LogSink | None = None,
    ) -> None:
        self.specs = specs
        self._environments = environments
        self._processes = FunctionEnvironments(
            specs, environments, max_environments=max_environments, limits=limits, log_sink=log_sink
        )

    def environment_of(self, logical_id: str) -> dict[str, str]:
        return dict(self._environments[logical_id])

    def invoke(self, spec: FunctionSpec, event: dict[str, Any], tenant_id: str | None = None) -> Any:
        """The handler's result; :class:`local_stack.lambda_.environments.FunctionError`
        when it raised, timed out or its environment ended (as Lambda reports it).
        ``tenant_id``: the invocation's tenant, for a function in tenant isolation
        mode (its environments are then that tenant's only)."""
        return self._processes.invoke(spec, event, tenant_id)

    def pids(self) -> dict[str, list[int]]:
        """The running environments' process ids, by function."""
        return self._processes.pids()

    def tenant_pids(self, logical_id: str) -> dict[str, list[int]]:
        """A tenant-isolated function's running environments' process ids, by tenant."""
        return self._processes.tenant_pids(logical_id)

    def settle_logs(self, timeout: float) -> bool:
        """True once every line the functions wrote so far reached the log sink."""
        return self._processes.settle_logs(timeout)

    def stop(self) -> None:
        self._processes.stop()


def lambda_environment(
    spec: FunctionSpec, endpoint: str, credentials: dict[str, str], session_name: str
) -> dict[str, str]:
    """What Lambda would give the function, pointed at the emulator."""
    return {
        **spec.environment,
        "AWS_ENDPOINT_OVERRIDE": endpoint,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_LAMBDA_FUNCTION_NAME": spec.logical_id,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": spec.log_group,
        "AWS_LAMBDA_LOG_STREAM_NAME": session_name,
        "AWS_LAMBDA_LOG_FORMAT": spec.log_format,
        # No X-Ray daemon and no CloudWatch here: traces off, metrics not printed.
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **credentials,
    }


def sam_env_vars(specs: Iterable[FunctionSpec], endpoint: str, vpc_endpoint: str) -> dict[str, dict[str, str]]:
    """The ``--env-vars`` file for ``sam local``: per function, the variables the
    template declares (sam local overrides no others), pointed at the emulator:
    the functions in the stack's VPC at its gateway endpoint's listener
    (``vpc_endpoint``), the others at the emulator. ``sam local invoke`` has no
    authorizer: the event carries what the authorizer would have passed
    (``.local/events/``: the claims, a token of the local pool's demo users and
    the tenant credentials the authorizer got for it from the local identity
    pool)."""
    return {
        spec.logical_id: {**spec.environment, "AWS_ENDPOINT_OVERRIDE": vpc_endpoint if spec.in_vpc else endpoint}
        for spec in specs
    }


# ---------------------------------------------------------------- the stack
@dataclass
class StackOptions:
    host: str = "127.0.0.1"
    port: int = 3000
    emulator_host: str = "127.0.0.1"
    emulator_port: int = 0
    # The listener standing for the stack's DynamoDB gateway endpoint (the VPC functions' way in).
    vpc_endpoint_port: int = 0
    state_dir: Path = DEFAULT_STATE_DIR
    # AWS_ENDPOINT_OVERRIDE in env.json (how a sam local container reaches the emulator).
    env_endpoint: str | None = None
    seed: bool = True
    demo_tenants: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(DEMO_TENANTS))
    # Template parameters, as `sam deploy --parameter-overrides` gives them
    # (e.g. smaller tiers for the tests); the defaults otherwise.
    parameters: dict[str, str] = field(default_factory=dict)
    # The emulator holding the shared user pool the parameters UserPoolId and UserPoolClientId
    # name (a cell's): its users and tokens are that pool's. None: the stack's own pool.
    user_pool_url: str | None = None
    # The template's tenant isolation variant (stack_model.isolation): every API
    # function's execution environments one tenant's, the gateway naming the tenant.
    tenant_isolation: bool = False
    # The authorizer's result cache (the template's ReauthorizeEvery unless set).
    authorizer_cache_seconds: float | None = None
    # How long the gateway keeps a key's usage plan before reading it again.
    usage_plan_refresh_seconds: float = 1.0
    # Execution environments (processes) a function may have at once under concurrent load.
    environments_per_function: int = DEFAULT_ENVIRONMENTS_PER_FUNCTION
    # Concurrent invocations of each SQS event source, at most (its MaximumConcurrency if lower).
    queue_concurrency: int = DEFAULT_QUEUE_CONCURRENCY
    # Realistic ConsumedCapacity (local_stack.emulator.consumed_capacity); off, moto's constant answer, as fast
    # as an answer without it (what the benchmark needs to measure the functions' cost of asking).
    capacity_model: bool = True


class LocalStack:
    def __init__(self, options: StackOptions | None = None) -> None:
        self.options = options or StackOptions()
        self.emulator = Emulator(
            self.options.emulator_host,
            self.options.emulator_port,
            control=self._control,
            endpoint_port=self.options.vpc_endpoint_port,
            capacity_model=self.options.capacity_model,
            user_pool_url=self.options.user_pool_url,
        )
        self.provisioned: Provisioned | None = None
        self.runtime: FunctionRuntime | None = None
        self.authorizer: LambdaAuthorizer | None = None
        # One per function with a DynamoDB stream event (the aggregator, the audit writer),
        # and one per mapping of each dedicated table's stream ("<function>@<table>").
        self.pollers: dict[str, StreamPoller] = {}
        self._dedicated_lock = threading.Lock()
        # One per SQS event source mapping, by its logical id.
        self.queue_pollers: dict[str, SqsPoller] = {}
        # The template's log subscription filters (the metering function's).
        self.log_delivery: LogDelivery | None = None
        self._api_server: _ApiServer | None = None
        self._api_thread: threading.Thread | None = None
        self._gateway: Gateway | None = None
        self._wrote_state = False
        # What a control request must carry (CONTROL_TOKEN_HEADER): only the state file tells it.
        self.control_token = secrets.token_urlsafe(32)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        started = time.monotonic()
        self._check_not_running()
        self.emulator.start()
        # Bound now (it listens last): its port is one of the stack's own, which no webhook may target.
        api_server = self._api_server = _ApiServer(self.options.host, self.options.port, self._serve_api, _QuietHandler)
        own_ports = {self.emulator.port, self.emulator.endpoint_port, api_server.server_port}
        provisioned = self.provisioned = self.emulator.provision(self.options.parameters)
        specs = {
            logical_id: dataclasses.replace(spec, environment=local_environment(spec.environment))
            for logical_id, spec in function_specs(
                provisioned.values, tenant_isolation=self.options.tenant_isolation
            ).items()
        }
        environments: dict[str, dict[str, str]] = {}
        role_credentials: dict[str, dict[str, str]] = {}
        for logical_id, spec in specs.items():
            role = provisioned.roles[function_role(logical_id)]
            if role.logical_id not in role_credentials:
                role_credentials[role.logical_id] = self.emulator.assume(role, f"local-{role.logical_id}")
            environments[logical_id] = lambda_environment(
                spec,
                self.emulator.endpoint_url if spec.in_vpc else self.emulator.url,
                role_credentials[role.logical_id],
                f"local-{logical_id}",
            ) | stack_port_environment(spec.environment, own_ports)
        queue_sources = [source for source in sqs_sources() if source.enabled and source.function in specs]
        concurrency = {source.name: self._queue_concurrency(source) for source in queue_sources}
        limits: dict[str, int] = {}
        for source in queue_sources:
            # A function's environments: enough for all its sources' concurrent invocations.
            limits[source.function] = limits.get(source.function, 0) + concurrency[source.name]
        # Subscribed log lines go to their destination function as CloudWatch Logs sends them.
        delivery = self.log_delivery = LogDelivery(
            subscriptions_from_template(), lambda destination, event: runtime.invoke(specs[destination], event)
        )
        runtime = self.runtime = FunctionRuntime(
            specs,
            environments,
            max_environments=self.options.environments_per_function,
            limits={function: max(limit, self.options.environments_per_function) for function, limit in limits.items()},
            log_sink=delivery.line,
        )
        delivery.start()

        stage = str(provisioned.values.ref("StageName"))
        declared = authorizer_spec()
        ttl = self.options.authorizer_cache_seconds
        self.authorizer = LambdaAuthorizer(
            specs[declared.function_logical_id],
            runtime.invoke,
            ttl_seconds=declared.ttl_seconds if ttl is None else ttl,
            validation_expression=declared.validation_expression,
        )
        keys = KeyDirectory(
            self.emulator.client("apigateway"),
            set(provisioned.usage_plans.values()),
            refresh_seconds=self.options.usage_plan_refresh_seconds,
        )
        self._gateway = Gateway(
            routes=routes_from_specs(specs.values()),
            authorizer=self.authorizer,
            meter=UsageMeter(keys),
            invoke=runtime.invoke,
            responses=GatewayResponses.from_template(provisioned.values),
            stage=stage,
            api_id=LOCAL_API_ID,
        )
        for function in stream_functions():
            self.pollers[function] = self._poller(stream_source(function), provisioned.stream_arn)
        self.emulator.on_table_write = self._table_written
        for source in queue_sources:
            self.queue_pollers[source.name] = self._queue_poller(
                source, specs[source.function], environments[source.function], runtime, concurrency[source.name]
            )
        self.emulator.on_queue_write = self._queue_written
        for poller in self.pollers.values():
            poller.start()
        for queue_poller in self.queue_pollers.values():
            queue_poller.start()
        if self.options.seed:
            for tenant, (user, admin) in self.options.demo_tenants.items():
                ensure_user(self.user_pool(), user, tenant)
                ensure_user(self.user_pool(), admin, tenant, admin=True)
                self.onboard(tenant)
        self._write_state(specs.values())
        # Last: the port answers once everything it leads to (tokens included) works.
        api_server.listen()
        self._api_thread = threading.Thread(
            target=api_server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name="api", daemon=True
        )
        self._api_thread.start()
        log.info(
            "local stack up in %.1fs: API %s, emulator %s", time.monotonic() - started, self.api_url, self.emulator.url
        )

    def _serve_api(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The API port's application: the gateway (set before the port listens)."""
        assert self._gateway is not None
        return self._gateway(environ, start_response)

    def _poller(self, source: StreamSource, stream_arn: str) -> StreamPoller:
        """A stream event source (``source``, of ``stream_arn``). Lambda reads the
        stream and sends to the on-failure destination with the function's
        execution role: so does the poller, through the guard."""
        assert self.provisioned is not None
        assert self.runtime is not None
        provisioned, runtime = self.provisioned, self.runtime
        function = source.function
        spec, environment = runtime.specs[function], runtime.environment_of(function)
        credentials = {
            "aws_access_key_id": environment["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": environment["AWS_SECRET_ACCESS_KEY"],
            "aws_session_token": environment["AWS_SESSION_TOKEN"],
        }
        sqs = self.emulator.client("sqs", **credentials)
        destination = provisioned.values.resolve(source.on_failure) if source.on_failure else None

        def on_failure(payload: dict[str, Any]) -> None:
            if destination is not None:
                sqs.send_message(QueueUrl=provisioned.queue_url(destination), MessageBody=failure_message(payload))

        return StreamPoller(
            self.emulator.client("dynamodbstreams", **credentials),
            stream_arn,
            source,
            invoke=lambda event: runtime.invoke(spec, event),
            on_failure=on_failure,
            function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{function}",
            idle_interval_s=IDLE_POLL_INTERVAL_S,
            told_of_every_write=True,
        )

    def deploy_dedicated(self, tenant_id: str) -> DedicatedTable:
        """The tenant's dedicated table in the emulator (:meth:`Emulator.deploy_dedicated`)
        and its stream's mappings as pollers, started: the same functions with
        the same filters, batches and failure handling as the pool stream's.
        Deployed again, the same table and pollers."""
        with self._dedicated_lock:
            dedicated = self.emulator.deploy_dedicated(tenant_id)
            for source in dedicated_stream_sources(dedicated.values):
                name = f"{source.function}@{dedicated.table_name}"
                if name not in self.pollers:
                    poller = self._poller(source, dedicated.stream_arn)
                    poller.start()
                    self.pollers = {**self.pollers, name: poller}
            return dedicated

    def remove_dedicated(self, tenant_id: str, waiting_days: int) -> dict[str, str] | None:
        """The tenant's dedicated table removed (:meth:`Emulator.remove_dedicated`),
        its stream's pollers stopped first (in AWS its mappings go with its
        stack); ``None`` if it has none."""
        with self._dedicated_lock:
            made = self.emulator.dedicated.get(tenant_id)
            if made is None:
                return None
            suffix = f"@{made.table_name}"
            for name in [name for name in self.pollers if name.endswith(suffix)]:
                self.pollers[name].stop()
                self.pollers = {other: poller for other, poller in self.pollers.items() if other != name}
            return self.emulator.remove_dedicated(tenant_id, waiting_days)

    def _queue_concurrency(self, source: SqsSource) -> int:
        limit = self.options.queue_concurrency
        return min(source.maximum_concurrency or limit, limit)

    def _queue_poller(
        self,
        source: SqsSource,
        spec: FunctionSpec,
        environment: dict[str, str],
        runtime: FunctionRuntime,
        concurrency: int,
    ) -> SqsPoller:
        """An SQS event source. Lambda receives, deletes and reads the queue's
        attributes with the function's execution role: so does the poller,
        through the guard."""
        assert self.provisioned is not None
        credentials = {
            "aws_access_key_id": environment["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": environment["AWS_SECRET_ACCESS_KEY"],
            "aws_session_token": environment["AWS_SESSION_TOKEN"],
        }
        queue_arn = str(self.provisioned.values.resolve(source.queue))
        poller = SqsPoller(
            self.emulator.client("sqs", **credentials),
            self.provisioned.queue_url(queue_arn),
            queue_arn,
            source,
            invoke=lambda event: runtime.invoke(spec, event),
            region=REGION,
            concurrency=concurrency,
        )
        # A deployment would fail here: so does the local stack's start.
        poller.validate(spec.timeout_s)
        return poller

    def _queue_written(self) -> None:
        for poller in self.queue_pollers.values():
            poller.notify()

    def _table_written(self, tables: frozenset[str] | None) -> None:
        for poller in self.pollers.values():
            if tables is None or table_name(poller.stream_arn) in tables:
                poller.notify()

    def stop(self) -> None:
        if self._api_server is not None:
            if self._api_thread is not None:
                self._api_server.shutdown()
            self._api_server.server_close()
        if self._api_thread is not None:
            self._api_thread.join(timeout=10)
        for poller in self.pollers.values():
            poller.stop()
        for queue_poller in self.queue_pollers.values():
            queue_poller.stop()
        if self.log_delivery is not None:
            self.log_delivery.stop()
        if self.runtime is not None:
            # After the API and the pollers, the only callers: no environment is started again.
            self.runtime.stop()
        self.emulator.stop()
        self._remove_state()
        self._api_server = None
        self._api_thread = None
        self.pollers = {}
        self.queue_pollers = {}
        self.log_delivery = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ what it offers
    @property
    def api_url(self) -> str:
        assert self._api_server is not None, "start() first"
        host = "127.0.0.1" if self.options.host in ("0.0.0.0", "") else self.options.host  # noqa: S104 - a URL
        return f"http://{host}:{self._api_server.server_port}"

    def user_pool(self) -> UserPool:
        assert self.provisioned is not None
        cognito = (
            emulator_client(self.options.user_pool_url, "cognito-idp")
            if self.options.user_pool_url
            else self.emulator.client("cognito-idp")
        )
        return UserPool(
            cognito=cognito,
            pool_id=self.provisioned.user_pool_id,
            client_id=self.provisioned.user_pool_client_id,
            admin_group=self.provisioned.admin_group,
        )

    def onboard(self, tenant_id: str) -> None:
        """The tenant's record and API key (in its tier's plan), if it has none yet."""
        from local_stack.running_stack import local_admin

        local_admin(self.state()).ensure(tenant_id)

    def token(self, tenant_id: str, username: str, *, admin: bool = False) -> str:
        pool = self.user_pool()
        ensure_user(pool, username, tenant_id, admin=admin)
        self.onboard(tenant_id)
        return id_token(pool, username)

    def tenant_credentials(self, token: str) -> TenantCredentials:
        """What the API's authorizer obtains for ``token`` from the local identity pool."""
        assert self.provisioned is not None
        return tenant_credentials(
            self.emulator.client("cognito-identity"),
            self.provisioned.identity_pool_id,
            self.provisioned.user_pool_provider_name,
            token,
        )

    def wait_for_stream(self, timeout: float = 30.0) -> bool:
        """True once every stream record written before the call was processed,
        by every stream function."""
        deadline = time.monotonic() + timeout
        drained = bool(self.pollers)
        for poller in list(self.pollers.values()):
            drained = poller.wait_drained(max(0.0, deadline - time.monotonic())) and drained
        return drained

    def wait_for_queues(self, timeout: float = 30.0) -> bool:
        """True once every message receivable before the call was handed to its
        function and no SQS-triggered invocation is under way (True without SQS
        event sources)."""
        deadline = time.monotonic() + timeout
        drained = True
        for poller in list(self.queue_pollers.values()):
            drained = poller.wait_drained(max(0.0, deadline - time.monotonic())) and drained
        return drained

    def advance_queue_clock(self, seconds: float) -> float:
        """Move the emulator's SQS clock forward (visibility timeouts, delays end
        sooner); the pollers look at once. The total offset."""
        offset = advance_queue_clock(seconds)
        self._queue_written()
        return offset

    def wait_for_logs(self, timeout: float = 30.0) -> bool:
        """True once every subscribed line the functions wrote before the call
        was delivered (the metering function invoked with it)."""
        if self.runtime is None or self.log_delivery is None:
            return False
        deadline = time.monotonic() + timeout
        settled = self.runtime.settle_logs(timeout)
        return self.log_delivery.drain(max(0.0, deadline - time.monotonic())) and settled

    def state(self) -> dict[str, Any]:
        assert self.provisioned is not None
        # Where the shared user pool is (make token's users), for a stack that has none of its own.
        shared_pool = {"user_pool_url": self.options.user_pool_url} if self.options.user_pool_url else {}
        return shared_pool | {
            "pid": os.getpid(),
            "api_url": self.api_url,
            "emulator_url": self.emulator.url,
            "vpc_endpoint_url": self.emulator.endpoint_url,
            "control_url": f"{self.emulator.url}/_local",
            # Sent as CONTROL_TOKEN_HEADER by whoever calls the control endpoints
            # (local_stack.running_stack.control_call).
            "control_token": self.control_token,
            "region": REGION,
            "user_pool_id": self.provisioned.user_pool_id,
            "user_pool_client_id": self.provisioned.user_pool_client_id,
            "user_pool_provider_name": self.provisioned.user_pool_provider_name,
            "identity_pool_id": self.provisioned.identity_pool_id,
            "admin_group": self.provisioned.admin_group,
            "table_name": self.provisioned.table_name,
            "stream_arn": self.provisioned.stream_arn,
            "tenant_role_arn": self.provisioned.roles["TenantAccessRole"].arn,
            # The key the webhook functions encrypt new secrets with (WEBHOOK_KEY_ARN).
            "webhook_key_arn": str(self.provisioned.values.get_att("WebhookSecretsKey.Arn")),
            "failure_queue_url": self.provisioned.failure_queue_url,
            "usage_plan_ids": dict(self.provisioned.usage_plans),
            "stack_name": str(self.provisioned.values.ref("AWS::StackName")),
            "authorizer_cache_seconds": self.authorizer.ttl_seconds if self.authorizer else None,
            # The one long-term key the emulator accepts (its administrator): what the ops
            # tools, your `aws --endpoint-url` commands and `sam local` sign with.
            "operator_access_key_id": OPERATOR_CREDENTIALS["aws_access_key_id"],
            "operator_secret_access_key": OPERATOR_CREDENTIALS["aws_secret_access_key"],
        }

    # ------------------------------------------------------------ control endpoint
    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes] | None:
        """``/_local/health``, ``/_local/stream/drain?timeout=<s>``,
        ``/_local/queues/drain?timeout=<s>``, ``/_local/queues/clock?advance=<s>``,
        ``/_local/logs/drain?timeout=<s>``, ``/_local/table/fingerprint`` and
        ``/_local/dedicated?tenant=<t>`` (POST: a dedicated tenant's table;
        DELETE with ``&waiting_days=<n>``: removed, its key's deletion scheduled) on
        the emulator's port (loopback only, and only with the stack's control
        token in ``X-Local-Control-Token``: a webhook delivery pointed at the
        port, or any other process that has not read the state file, gets 403):
        how another process waits for the stream, the SQS event sources or the
        log subscriptions' deliveries (the usage counters), moves the queues'
        clock forward, sees whether the table changed, and deploys a dedicated
        tenant's table (its outputs, as a deployed stack's name them)."""
        path = environ.get("PATH_INFO", "")
        if not path.startswith("/_local/"):
            return None
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        posted = environ.get("REQUEST_METHOD") == "POST"
        # A drain waits at most this long (the caller's `timeout`, 30 s unless given, at most 300 s).
        timeout = min(float(query.get("timeout", ["30"])[0]), 300.0) if posted else 0.0
        status, payload = "404 Not Found", dict[str, Any](error="unknown")
        token = str(environ.get("HTTP_" + CONTROL_TOKEN_HEADER.upper().replace("-", "_"), ""))
        if environ.get("REMOTE_ADDR") not in ("127.0.0.1", "::1"):
            status, payload = "403 Forbidden", {"error": "loopback only"}
        elif not hmac.compare_digest(token.encode(), self.control_token.encode()):
            status, payload = "403 Forbidden", {"error": f"{CONTROL_TOKEN_HEADER}: the stack's control token required"}
        elif path == "/_local/health":
            status, payload = "200 OK", {"status": "ok"}
        elif path == "/_local/stream/drain" and posted:
            drained = self.wait_for_stream(timeout)
            pollers = list(self.pollers.values())
            status = "200 OK"
            payload = {
                "drained": drained,
                "delivered": sum(poller.delivered for poller in pollers),
                "given_up": sum(poller.given_up for poller in pollers),
            }
        elif path == "/_local/table/fingerprint" and environ.get("REQUEST_METHOD") == "GET":
            assert self.provisioned is not None
            skipped = query.get("skip_pk_containing", [])
            status, payload = "200 OK", self.emulator.table_fingerprint(self.provisioned.table_name, skipped)
        elif path == "/_local/queues/drain" and posted:
            drained = self.wait_for_queues(timeout)
            queue_pollers = list(self.queue_pollers.values())
            status = "200 OK"
            payload = {
                "drained": drained,
                "invocations": sum(poller.invocations for poller in queue_pollers),
                "deleted": sum(poller.deleted for poller in queue_pollers),
                "failed_invocations": sum(poller.failed_invocations for poller in queue_pollers),
            }
        elif path == "/_local/queues/clock" and posted:
            try:
                status, payload = "200 OK", {"offset_s": self.advance_queue_clock(float(query["advance"][0]))}
            except (KeyError, ValueError):
                status, payload = "400 Bad Request", {"error": "advance=<seconds>, not negative"}
        elif path == "/_local/dedicated" and posted:
            status, payload = self._deploy_dedicated_control(query.get("tenant", [""])[0])
        elif path == "/_local/dedicated" and environ.get("REQUEST_METHOD") == "DELETE":
            status, payload = self._remove_dedicated_control(
                query.get("tenant", [""])[0], query.get("waiting_days", [""])[0]
            )
        elif path == "/_local/logs/drain" and posted:
            drained = self.wait_for_logs(timeout)
            delivery = self.log_delivery
            status = "200 OK"
            payload = {
                "drained": drained,
                "deliveries": delivery.deliveries if delivery else 0,
                "delivered_lines": delivery.delivered_lines if delivery else 0,
                "given_up": delivery.given_up if delivery else 0,
            }
        body = json.dumps(payload).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def _deploy_dedicated_control(self, tenant: str) -> tuple[str, dict[str, Any]]:
        """``POST /_local/dedicated?tenant=<t>``: the tenant's dedicated table's outputs."""
        try:
            tenant_id = validate_tenant_id(tenant)
        except ValueError:
            return "400 Bad Request", {"error": "tenant=<a tenant id>"}
        return "200 OK", dict(self.deploy_dedicated(tenant_id).outputs())

    def _remove_dedicated_control(self, tenant: str, waiting_days: str) -> tuple[str, dict[str, Any]]:
        """``DELETE /_local/dedicated?tenant=<t>&waiting_days=<7-30>``: what was
        removed (``deleted`` false: the tenant had no dedicated table)."""
        try:
            tenant_id = validate_tenant_id(tenant)
            days = int(waiting_days)
            if not 7 <= days <= 30:
                raise ValueError(days)
        except ValueError:
            return "400 Bad Request", {"error": "tenant=<a tenant id>&waiting_days=<7 to 30>"}
        removed = self.remove_dedicated(tenant_id, days)
        return "200 OK", {"deleted": removed is not None, **(removed or {})}

    # ------------------------------------------------------------ state files
    def _check_not_running(self) -> None:
        existing = read_state(self.options.state_dir)
        if existing is not None:
            raise RuntimeError(
                f"a local stack is already running (pid {existing['pid']}, {existing['api_url']}); stop it first"
            )

    def _write_state(self, specs: Iterable[FunctionSpec]) -> None:
        directory = self.options.state_dir
        directory.mkdir(parents=True, exist_ok=True)
        endpoint = self.options.env_endpoint or self.emulator.url
        # The gateway endpoint's listener, on the host the containers reach the emulator by.
        vpc_endpoint = urllib.parse.urlsplit(endpoint)._replace(
            netloc=f"{urllib.parse.urlsplit(endpoint).hostname}:{self.emulator.endpoint_port}"
        )
        write_json(directory / ENV_FILE, sam_env_vars(specs, endpoint, vpc_endpoint.geturl()))
        self._wrote_state = True
        if self.options.seed:
            assert self.provisioned is not None
            sample_events.write_local(
                directory / EVENTS_DIR, self.user_pool(), self.tenant_credentials, self.provisioned.stream_arn
            )
        write_json(directory / STATE_FILE, self.state())

    def _remove_state(self) -> None:
        if not self._wrote_state:
            return
        for name in (STATE_FILE, ENV_FILE):
            (self.options.state_dir / name).unlink(missing_ok=True)
        shutil.rmtree(self.options.state_dir / EVENTS_DIR, ignore_errors=True)
        self._wrote_state = False
