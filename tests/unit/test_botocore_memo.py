"""The test processes remember botocore's event aliases, handler signatures and
User-Agent strings (tests/conftest.py): the remembered answers are botocore's own."""

from __future__ import annotations

from typing import Any

import boto3
import botocore.hooks
import pytest
from botocore.config import Config
from botocore.context import start_as_current_context
from botocore.hooks import EventAliaser, HierarchicalEmitter
from botocore.useragent import UserAgentString, register_feature_id

from tests import conftest

EVENT_NAMES = [
    "before-call.apigateway.CreateApiKey",  # renamed: api-gateway
    "before-parameter-build.autoscaling.CreateLaunchConfiguration",  # renamed: auto-scaling
    "docs.request-example.cloudsearchdomain.Search.complete-section",  # a dotted alias
    "provide-client-params.dynamodb.Query",  # no alias
    "after-call.cognito-identity.GetId",
]


def test_remembered_event_names_are_botocores_aliases() -> None:
    aliaser: Any = EventAliaser(HierarchicalEmitter())
    original = conftest._alias_event_name
    assert vars(EventAliaser)["_alias_event_name"] is conftest._remembered_alias_event_name  # installed
    for name in EVENT_NAMES:
        assert aliaser._alias_event_name(name) == original(EventAliaser(HierarchicalEmitter()), name), name
    assert aliaser._alias_event_name("before-call.apigateway.CreateApiKey") == "before-call.api-gateway.CreateApiKey"


def test_an_aliaser_with_other_aliases_is_not_answered_from_the_memory() -> None:
    custom: Any = EventAliaser(HierarchicalEmitter(), event_aliases={"dynamodb": "ddb"})
    assert custom._alias_event_name("provide-client-params.dynamodb.Query") == "provide-client-params.ddb.Query"


def test_a_handler_without_kwargs_is_still_refused() -> None:
    def no_kwargs(params: Any) -> None:
        return None

    def with_kwargs(params: Any, **kwargs: Any) -> None:
        return None

    class Handlers:
        def method(self, **kwargs: Any) -> None:
            return None

    hooks: Any = botocore.hooks
    assert hooks.accepts_kwargs(with_kwargs) == "kwargs"
    assert hooks.accepts_kwargs(Handlers().method) == "kwargs"
    for _ in range(2):  # remembered or not, the same answer
        assert hooks.accepts_kwargs(no_kwargs) is None
        with pytest.raises(ValueError, match="must accept keyword arguments"):
            HierarchicalEmitter().register("before-call.dynamodb.Query", no_kwargs)


def test_every_field_a_user_agent_is_built_from_is_in_its_memory_key() -> None:
    # A botocore that adds a field fails here rather than answering an old string.
    assert vars(UserAgentString.from_environment()).keys() == conftest.USER_AGENT_FIELDS
    assert vars(UserAgentString)["to_string"] is conftest._remembered_user_agent  # installed


# Config's stubs lack user_agent_appid (botocore has it since 1.31).
APP_ID: dict[str, Any] = {"user_agent_appid": "app-1"}
OTHER_APP_ID: dict[str, Any] = {"user_agent_appid": "app-2"}
CONFIGS: list[Any] = [
    None,
    Config(),
    Config(retries={"mode": "standard", "total_max_attempts": 3}),
    Config(retries={"mode": "adaptive"}, user_agent_extra="extra/1"),
    Config(**APP_ID),
    Config(endpoint_discovery_enabled=True, retries={"mode": "legacy"}, **OTHER_APP_ID),
    Config(user_agent="fixed/1.0"),
    Config(user_agent="fixed/1.0", user_agent_extra="region/us-east-1"),
]


def _agents() -> list[Any]:
    base = UserAgentString.from_environment()
    named = UserAgentString.from_environment().set_session_config("tool", "2.0", "session-extra")
    lambda_env = UserAgentString("Linux", "5.10", "x86_64", "3.13.0", "CPython", "AWS_Lambda_python3.13", "0.1")
    featured = UserAgentString.from_environment()
    featured.set_client_features({"A", "B"})
    return [agent.with_client_config(config) for agent in (base, named, lambda_env, featured) for config in CONFIGS]


def _user_agents(feature: str | None) -> list[str]:
    with start_as_current_context():
        if feature:
            register_feature_id(feature)
        return [agent.to_string() for agent in _agents()]


def _botocores_user_agents(feature: str | None) -> list[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(UserAgentString, "to_string", conftest._user_agent_string)
        return _user_agents(feature)


@pytest.mark.parametrize("feature", [None, "RETRY_MODE_STANDARD", "PAGINATOR"])
def test_remembered_user_agents_are_botocores(feature: str | None) -> None:
    for _ in range(2):  # remembered or not, the same answer
        remembered = _user_agents(feature)
        assert remembered == _botocores_user_agents(feature)


def test_a_clients_requests_carry_botocores_user_agent(aws: None) -> None:
    sent: list[str] = []
    client: Any = boto3.client("sqs", region_name="us-east-1", config=Config(retries={"mode": "standard"}))
    client.meta.events.register(
        "before-send.sqs.*", lambda request, **_: sent.append(request.headers["User-Agent"].decode())
    )
    client.list_queues()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(UserAgentString, "to_string", conftest._user_agent_string)
        client.list_queues()
    assert sent[0] == sent[1]
    assert "cfg/retry-mode#standard" in sent[0]
