"""The test processes remember botocore's event aliases and handler signatures
(tests/conftest.py): the remembered answers are botocore's own."""

from __future__ import annotations

from typing import Any

import botocore.hooks
import pytest
from botocore.hooks import EventAliaser, HierarchicalEmitter

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
