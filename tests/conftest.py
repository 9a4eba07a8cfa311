"""Shared fixtures: fake AWS credentials, moto with the table from template.yaml
and the template's identity pool, ID tokens signed by the tests' own user-pool
key, random tenant ids. Nothing here can reach real AWS.

In-process (``mock_aws``) there is no emulator and no user pool: the
template's identity pool is served by :mod:`local_stack.cognito.identity_pool`,
registered into moto (:func:`local_stack.cognito.identity_pool.in_process`), and it
verifies tokens against :data:`SIGNING_KEY`, the key of the user pool
``us-east-1_EXAMPLE`` whose app client is ``SAMPLE_CLIENT_ID``. Tests get their
callers' tokens from :func:`token_for_claims`, so the handlers exchange real
(if locally signed) tokens for tenant credentials exactly as when deployed.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import os
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import boto3
import botocore.context
import botocore.hooks
import botocore.loaders
import botocore.session
import botocore.useragent
import pytest
from botocore.utils import EVENT_ALIASES
from joserfc import jwt
from joserfc.jwk import RSAKey
from moto import mock_aws
from moto.core.base_backend import BackendDict
from moto.core.model_instances import reset_model_data

import tests.depth  # noqa: F401 - loads the hypothesis profile of the depth asked for

# What every function's environment holds before its modules are imported (the
# template's Globals): Powertools' Metrics reads its namespace and service when
# built, and a module that builds one at import (the resolver's) may be imported
# while tests are collected, before any fixture runs.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "SupportTickets")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "support-tickets")
from local_stack.cognito import identity_pool
from local_stack.emulator import moto_fixes
from local_stack.event_sources.sqs_poller import QUEUE_CLOCK
from stack_model.events import SAMPLE_CLIENT_ID
from stack_model.template import table_definition
from support_tickets.core.identity import Caller, IdToken, TenantCredentials, caller_from_context, token_payload
from support_tickets.core.settings import get_settings
from support_tickets.data.comment_repository import CommentRepository
from support_tickets.data.session import tenant_clients, token_exchange
from support_tickets.data.table import TenantTable
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain.tenancy import table_for
from support_tickets.streams.aggregation import aggregator_client
from support_tickets.streams.audit_writer import audit_client, audit_writer
from support_tickets.streams.records import failure_queue_client
from support_tickets.webhooks.fanout import webhook_fanout

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.tenants import TenantAdmin
    from tests.e2e.conftest import RunningStack

moto_fixes.apply()


class CurrentStdout:
    """Writes wherever ``sys.stdout`` points at the moment (capsys swaps it)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture(autouse=True)
def functions_log_to_the_current_stdout() -> None:
    """The functions' Powertools Logger (one handler for the service's logger) keeps the
    stdout of the moment it was made: in a test, maybe a capture closed since, and then
    every later line is a "--- Logging error ---" traceback in whatever test's stderr a
    command's one-line error is asserted on. It writes to the current stdout instead
    (plain assignment: ``setStream`` would flush the old stream)."""
    for handler in logging.getLogger(os.environ["POWERTOOLS_SERVICE_NAME"]).handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler.stream, CurrentStdout):
            handler.stream = CurrentStdout()


# Each test builds fresh boto3 sessions (a fresh mocked account, fresh
# credentials), and each new session would read and parse botocore's service
# models again: a third of the in-process tests' time. One loader per process,
# as a Lambda container's one long-lived session has.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)

# Each new session and client also registers botocore's ~150 built-in handlers,
# aliasing every event name and inspecting every handler's signature afresh (a fifth
# of an in-process API test's time): both are pure functions of the name (under
# botocore's constant alias table) and of the handler's function. Remembered per
# process, as a long-lived session remembers them; nothing else of botocore changes.
_hooks: Any = botocore.hooks  # private names, untyped in botocore's stubs
_alias_event_name = _hooks.EventAliaser._alias_event_name
_aliased_event_names: dict[str, str] = {}


def _remembered_alias_event_name(self: Any, event_name: str) -> str:
    if self._event_aliases != EVENT_ALIASES:
        return str(_alias_event_name(self, event_name))
    aliased = _aliased_event_names.get(event_name)
    if aliased is None:
        aliased = _aliased_event_names[event_name] = str(_alias_event_name(self, event_name))
    return aliased


_accepts_kwargs = _hooks.accepts_kwargs
_kwargs_of_functions: dict[Any, Any] = {}


def _remembered_accepts_kwargs(handler: Any) -> Any:
    """The name of the handler's ``**kwargs`` (``None`` if it has none), as botocore's."""
    function = getattr(handler, "__func__", handler)  # a bound method: its function's signature
    if not inspect.isfunction(function):
        return _accepts_kwargs(handler)
    if function not in _kwargs_of_functions:
        _kwargs_of_functions[function] = _accepts_kwargs(handler)
    return _kwargs_of_functions[function]


_hooks.EventAliaser._alias_event_name = _remembered_alias_event_name
_hooks.accepts_kwargs = _remembered_accepts_kwargs

# Each request builds its User-Agent twice (before signing, and again once the
# request exists, for the features it used), component by component, each one
# sanitized character by character: a tenth of an in-process request. It is a
# pure function of the fields below (the process's platform, the session's and
# the client's settings, the features in use), so each string is remembered by
# them; a fixed ``Config(user_agent=...)`` would skip the build too, but only for
# clients made with that config, and the code under test makes its own.
_user_agent_string = botocore.useragent.UserAgentString.to_string
_user_agents: dict[tuple[Any, ...], str] = {}
USER_AGENT_FIELDS = frozenset(
    {
        "_platform_name",
        "_platform_version",
        "_platform_machine",
        "_python_version",
        "_python_implementation",
        "_execution_env",
        "_crt_version",
        "_session_user_agent_name",
        "_session_user_agent_version",
        "_session_user_agent_extra",
        "_client_config",
        "_client_features",
    }
)


def _user_agent_key(agent: Any) -> tuple[Any, ...]:
    """Everything ``UserAgentString.to_string`` reads, as botocore reads it."""
    config = agent._client_config
    settings = (
        None
        if config is None
        else (
            getattr(config, "_supplied_user_agent", _user_agent_key),  # a sentinel: absent
            config.user_agent,
            config.retries.get("mode") if config.retries else None,
            bool(config.endpoint_discovery_enabled),
            config.user_agent_appid,
            config.user_agent_extra,
        )
    )
    context = botocore.context.get_context()
    return (
        agent._platform_name,
        agent._platform_version,
        agent._platform_machine,
        agent._python_version,
        agent._python_implementation,
        agent._execution_env,
        agent._crt_version,
        agent._session_user_agent_name,
        agent._session_user_agent_version,
        agent._session_user_agent_extra,
        settings,
        frozenset(agent._client_features or ()),
        frozenset(context.features) if context is not None else frozenset(),
    )


def _remembered_user_agent(self: Any) -> str:
    key = _user_agent_key(self)
    agent = _user_agents.get(key)
    if agent is None:
        agent = _user_agents[key] = str(_user_agent_string(self))
    return agent


botocore.useragent.UserAgentString.to_string = _remembered_user_agent  # type: ignore[method-assign]

REGION = "us-east-1"
USER_POOL_ID = "us-east-1_EXAMPLE"
USER_POOL_PROVIDER = f"cognito-idp.{REGION}.amazonaws.com/{USER_POOL_ID}"  # its provider_name
IDENTITY_POOL_ID = f"{REGION}:0c1b5f3a-7d2e-4a8b-9c6d-000000000013"
# The in-process user pool: tokens signed with anything but its key are refused.
USER_POOL = identity_pool.SigningUserPool(USER_POOL_ID, SAMPLE_CLIENT_ID, REGION)
SIGNING_KEY = USER_POOL.key
TOKEN_SECONDS = 3600
FAILURE_QUEUE_NAME = "aggregate-counts-failures"
# Numbers as no client should write them, that int() and a Unicode \d still
# read as 3 (or 10): Arabic-Indic, Extended Arabic-Indic, Devanagari, fullwidth
# and mathematical digits (all Unicode Nd), a superscript (isdigit), and int()'s
# own leniencies (an underscore, surrounding space, a sign).
NOT_ASCII_NUMBERS = ("\u0663", "\u06f3", "\u0969", "\uff13", "\U0001d7d1", "1\u0660", "\u00b3")
INT_ODDITIES = ("1_0", " 3", "3 ", "+3", "\t3", "3\n", "\u20033")
FAILURE_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/{FAILURE_QUEUE_NAME}"
WEBHOOK_QUEUE_NAME = "webhook-events.fifo"
WEBHOOK_DEAD_LETTER_QUEUE_NAME = "webhook-events-dead-letters.fifo"
WEBHOOK_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/{WEBHOOK_QUEUE_NAME}"
WEBHOOK_DEAD_LETTER_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/{WEBHOOK_DEAD_LETTER_QUEUE_NAME}"


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials and the functions' environment, for every test."""
    for name in list(os.environ):
        if name.startswith("AWS_") and name not in {"AWS_SAM_STACK_NAME"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("TABLE_NAME", table_definition()["TableName"])
    monkeypatch.setenv("IDENTITY_POOL_ID", IDENTITY_POOL_ID)
    monkeypatch.setenv("USER_POOL_PROVIDER_NAME", USER_POOL_PROVIDER)
    monkeypatch.setenv("FAILURE_QUEUE_URL", FAILURE_QUEUE_URL)
    monkeypatch.setenv("WEBHOOK_EVENTS_QUEUE_URL", WEBHOOK_QUEUE_URL)
    monkeypatch.setenv("WEBHOOK_DEAD_LETTER_QUEUE_URL", WEBHOOK_DEAD_LETTER_QUEUE_URL)
    monkeypatch.setenv("ALLOWED_CLIENT_IDS", SAMPLE_CLIENT_ID)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "support-tickets")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SupportTickets")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_DEV", "false")
    _clear_container_caches()
    yield
    _clear_container_caches()
    # moto's SQS clock is this process's: a test that moved it on (visibility, retries)
    # must not leave the next one's messages sent "in the future".
    QUEUE_CLOCK.offset_s = 0.0


def _clear_container_caches() -> None:
    """What a fresh Lambda container starts without."""
    caches = (get_settings, token_exchange, tenant_clients, tenant_configs)
    for cached in (*caches, aggregator_client, audit_client, audit_writer, failure_queue_client, webhook_fanout):
        cached.cache_clear()
    with _gateway_answers_lock:
        _gateway_answers.clear()


# The ARN of the webhook secrets key in the current mocked account (moto gives
# each new key a random id): the ``aws`` fixture names it in WEBHOOK_KEY_ARN.
_webhook_key: list[str] = []


def webhook_key_arn() -> str:
    """The webhook secrets key of the current mocked account (for WEBHOOK_KEY_ARN)."""
    return _webhook_key[0]


@functools.cache
def _admin_client(service: str) -> Any:
    """The tests' own client of ``service`` in the mocked account, one per worker
    (moto serves every client, whenever made; making one costs milliseconds, and
    the suite made thousands). Shared: never register event handlers on it."""
    return boto3.client(service, region_name=REGION)  # type: ignore[call-overload]


def _create_resources() -> None:
    _admin_client("dynamodb").create_table(**table_definition())
    sqs = _admin_client("sqs")
    sqs.create_queue(QueueName=FAILURE_QUEUE_NAME)
    dead_letters = sqs.create_queue(QueueName=WEBHOOK_DEAD_LETTER_QUEUE_NAME, Attributes={"FifoQueue": "true"})
    dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letters["QueueUrl"], AttributeNames=["QueueArn"])
    redrive = {"deadLetterTargetArn": dead_letter_arn["Attributes"]["QueueArn"], "maxReceiveCount": "100"}
    sqs.create_queue(
        QueueName=WEBHOOK_QUEUE_NAME,
        Attributes={"FifoQueue": "true", "VisibilityTimeout": "180", "RedrivePolicy": json.dumps(redrive)},
    )
    key = _admin_client("kms").create_key(Description="WebhookSecretsKey")["KeyMetadata"]
    _webhook_key[:] = [key["Arn"]]


@contextmanager
def mocked_aws() -> Iterator[identity_pool.LocalIdentityPool]:
    """moto, with the SupportTicket table created from template.yaml's definition,
    the aggregator's failure queue, the webhook secrets key and the template's
    identity pool."""
    pool = USER_POOL.identity_pool(IDENTITY_POOL_ID)
    with mock_aws():
        _create_resources()
        identity_pool.register(pool)
        try:
            yield pool
        finally:
            identity_pool.unregister(pool)


def _empty_aws() -> None:
    """Every moto backend back to nothing, then the table, queue and key again: a
    fresh account inside a module's shared ``mock_aws``."""
    BackendDict.reset()
    reset_model_data()
    _create_resources()


# A module marked ``shared_aws`` gets one mocked AWS for all its tests (building
# one per test is the in-process suite's largest set-up cost): for modules whose
# tests use tenants of their own and compare the table before and after, never
# its whole contents. A test of such a module marked ``fresh_aws`` (it uses
# fixed tenants such as "1" and "10", reads the stream, or counts the whole
# table) gets an empty account of its own.
SHARED_AWS = pytest.mark.shared_aws
FRESH_AWS = pytest.mark.fresh_aws


@pytest.fixture(scope="module")
def _module_aws() -> Iterator[identity_pool.LocalIdentityPool]:
    with mocked_aws() as pool:
        yield pool


@pytest.fixture
def aws(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[identity_pool.LocalIdentityPool]:
    if request.node.get_closest_marker("shared_aws") is None:
        with mocked_aws() as pool:
            monkeypatch.setenv("WEBHOOK_KEY_ARN", _webhook_key[0])
            yield pool
        return
    shared: identity_pool.LocalIdentityPool = request.getfixturevalue("_module_aws")
    if request.node.get_closest_marker("fresh_aws") is None:
        monkeypatch.setenv("WEBHOOK_KEY_ARN", _webhook_key[0])
        yield shared
        return
    _empty_aws()
    monkeypatch.setenv("WEBHOOK_KEY_ARN", _webhook_key[0])
    try:
        yield shared
    finally:
        _empty_aws()


@pytest.fixture
def dynamodb(aws: None) -> DynamoDBClient:
    """An admin client on the mocked table, for arranging and asserting (not for code under
    test); the worker's one: a test that listens to its calls makes a client of its own."""
    client: DynamoDBClient = _admin_client("dynamodb")
    return client


@pytest.fixture
def table_name() -> str:
    return str(table_definition()["TableName"])


RepoFactory = Callable[[str], TicketRepository]
CommentsFactory = Callable[[str], CommentRepository]


# ---------------------------------------------------------------- tokens and callers
def sign_token(payload: Mapping[str, Any], key: RSAKey = SIGNING_KEY) -> str:
    """An RS256 JWT with this payload, signed as the in-process user pool signs."""
    return jwt.encode({"alg": "RS256", "kid": key.kid}, dict(payload), key)


def tenant_claims(tenant_id: str, username: str = "alice", *, admin: bool = False) -> dict[str, str]:
    """The claims of a Cognito ID token of the in-process pool, as API Gateway
    passes them (all strings)."""
    claims = {
        "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant_id}/{username}")),
        "iss": f"https://{USER_POOL_PROVIDER}",
        "aud": SAMPLE_CLIENT_ID,
        "token_use": "id",
        "cognito:username": username,
        "custom:tenant_id": tenant_id,
        "auth_time": "1795000000",
        "iat": "1795000000",
        "exp": "Sat Nov 21 11:00:00 UTC 2026",
        "jti": str(uuid.uuid5(uuid.NAMESPACE_URL, f"jti/{tenant_id}/{username}")),
    }
    if admin:
        claims["cognito:groups"] = "admin"
    return claims


_tokens: dict[tuple[tuple[str, str], ...], tuple[float, str]] = {}
_tokens_lock = threading.Lock()


def token_for_claims(claims: Mapping[str, str], *, groups: list[str] | None = None) -> str:
    """The ID token these claims came from: same claims (``cognito:groups`` as
    the token's array), fresh ``iat``/``exp``, signed with :data:`SIGNING_KEY`.
    The same claims give the same token for half its life (a warm container
    sees a user's token again, as in production)."""
    key = tuple(sorted(claims.items())) + tuple(("group", group) for group in groups or ())
    now = time.time()
    with _tokens_lock:
        cached = _tokens.get(key)
        if cached is not None and cached[0] > now + TOKEN_SECONDS / 2:
            return cached[1]
    payload: dict[str, Any] = {name: value for name, value in claims.items() if name not in {"exp", "iat", "auth_time"}}
    if groups is not None:
        payload["cognito:groups"] = groups
    elif "cognito:groups" in claims:
        payload["cognito:groups"] = claims["cognito:groups"].split(",") if claims["cognito:groups"] else []
    payload.update(iat=int(now), auth_time=int(now), exp=int(now) + TOKEN_SECONDS)
    token = sign_token(payload)
    with _tokens_lock:
        _tokens[key] = (now + TOKEN_SECONDS, token)
    return token


# API Gateway's authorizer cache, for the in-process requests: the answer (its
# credentials included) per token, for ReauthorizeEvery; the authorizer itself keeps none.
_gateway_answers: dict[str, tuple[float, TenantCredentials]] = {}
_gateway_answers_lock = threading.Lock()
AUTHORIZER_CACHE_SECONDS = 300


def credentials_for_token(token: str) -> TenantCredentials:
    """What the API's authorizer passes for ``token``: the in-process identity
    pool's credentials, from the authorizer's token exchange, kept per token for
    300 s as API Gateway keeps the authorizer's answer."""
    now = time.time()
    with _gateway_answers_lock:
        cached = _gateway_answers.get(token)
        if cached is not None and now < cached[0]:
            return cached[1]
    payload = token_payload(token) or {}
    credentials = token_exchange().credentials(IdToken(token, str(payload["sub"]), int(payload["exp"])))
    with _gateway_answers_lock:
        _gateway_answers[token] = (now + AUTHORIZER_CACHE_SECONDS, credentials)
    return credentials


def caller_for(tenant_id: str, username: str = "alice", *, admin: bool = False) -> Caller:
    """A caller of the in-process pool, as the layer builds it from a request."""
    from stack_model.events import authorizer_context

    token = token_for_claims(tenant_claims(tenant_id, username, admin=admin))
    context = authorizer_context(token_payload(token) or {}, credentials=credentials_for_token(token))
    return caller_from_context(context, {SAMPLE_CLIENT_ID}, f"Bearer {token}")


def tenant_table(tenant_id: str) -> TenantTable:
    """A tenant's view of the mocked table, with the credentials of one of its
    users' tokens (the identity pool's, through the real token exchange)."""
    return table_for(caller_for(tenant_id))


@pytest.fixture
def repo_for(aws: None) -> RepoFactory:
    """Ticket repositories on the mocked table, through the real tenant session."""

    def make(tenant_id: str) -> TicketRepository:
        return TicketRepository(tenant_table(tenant_id))

    return make


@pytest.fixture
def comments_for(aws: None) -> CommentsFactory:
    def make(tenant_id: str) -> CommentRepository:
        return CommentRepository(tenant_table(tenant_id))

    return make


def jwt_shaped(payload: Mapping[str, Any]) -> str:
    """A token with this payload and a signature nobody checks: what a function
    finds in the Authorization header after API Gateway verified the real one."""

    def part(value: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(payload)}.c2lnbmF0dXJl"


def random_tenant_id() -> str:
    return f"t-{secrets.token_hex(4)}"


@pytest.fixture
def new_tenant() -> Callable[[], str]:
    return random_tenant_id


def instant_tenant_admin(dynamodb: DynamoDBClient, table_name: str) -> TenantAdmin:
    """The operator's tool, with no phase to wait out: in-process tests make a
    container see a record by clearing its cache, not by waiting for its TTL
    (``changed_at`` is in whole seconds, so even a 0 s phase would sleep up to
    one second). The waits themselves are tested with a fake clock."""
    from ops.tenants import TenantAdmin

    return TenantAdmin(dynamodb, table_name, phase_seconds=0.0, sleep=lambda _: None)


def all_items(dynamodb: DynamoDBClient, table_name: str) -> list[dict[str, Any]]:
    """Every item of the table, for before/after comparisons in tests only.

    In-process, moto's own table is read: a Scan of a shared table through
    moto's response serializer costs more than most tests it checks. Against
    an emulator in another process, a Scan."""
    if dynamodb.meta.endpoint_url == f"https://dynamodb.{dynamodb.meta.region_name}.amazonaws.com":
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][dynamodb.meta.region_name].get_table(table_name)
        in_moto: list[dict[str, Any]] = [item.to_json()["Attributes"] for item in table.all_items()]
        return sorted(in_moto, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table_name}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack, as `make dev` runs it: one per session (per xdist
    worker), shared by every suite that needs one (e2e, reliability, throttling)."""
    from tests.e2e.conftest import session_stack

    yield from session_stack(tmp_path_factory)
