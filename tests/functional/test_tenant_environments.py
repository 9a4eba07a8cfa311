"""The local stack honours Lambda's tenant isolation mode (a function whose
``TenancyConfig`` is ``PER_TENANT``, ``TenantIsolationMode=PER_TENANT`` in the
template): its execution environments are per tenant, so what one tenant's
request leaves in the function's modules is invisible to another tenant's
requests, and still there for its own; without the mode one warm environment
serves both tenants and they share it. The invocation's tenant is the
context's ``tenant_id``; Lambda's refusals (no tenant for the mode, a tenant
without it) are modelled; past the machine's bound the least recently used
idle environment ends. With the probe function of
test_execution_environments.py, tenants ``1`` and ``10``; nothing is timed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from local_stack.lambda_.environments import FunctionEnvironments, InvalidTenant
from local_stack.stack import FunctionRuntime, lambda_environment
from tests.functional.test_execution_environments import ENDPOINT, key_of, probe, runtime_for

ISOLATED = dataclasses.replace(probe("Isolated"), tenant_isolation=True)
SHARED = probe("Shared")


@pytest.fixture
def runtime() -> Iterator[FunctionRuntime]:
    started = runtime_for(ISOLATED, SHARED)
    try:
        yield started
    finally:
        started.stop()


def test_with_tenant_isolation_one_tenants_module_state_is_invisible_to_anothers(runtime: FunctionRuntime) -> None:
    # Given: tenant 1's request leaves something in the function's modules
    first = runtime.invoke(ISOLATED, {"mark": "left by 1"}, tenant_id="1")
    # When tenant 10 calls the same function
    other = runtime.invoke(ISOLATED, {"mark": "left by 10"}, tenant_id="10")
    again = runtime.invoke(ISOLATED, {}, tenant_id="1")
    # Then tenant 10 ran in an environment of its own, cold, which never saw tenant 1's state
    assert other["pid"] != first["pid"]
    assert (first["cold_start"], other["cold_start"]) == (True, True)
    assert other["marks"] == ["left by 10"]
    # and tenant 1's next request is warm, in its own environment, with only its own state
    assert (again["pid"], again["cold_start"], again["marks"]) == (first["pid"], False, ["left by 1"])
    # The context names the invocation's tenant
    assert [result["tenant_id"] for result in (first, other, again)] == ["1", "10", "1"]
    assert runtime.tenant_pids(ISOLATED.logical_id) == {"1": [first["pid"]], "10": [other["pid"]]}


def test_without_tenant_isolation_both_tenants_share_one_environment(runtime: FunctionRuntime) -> None:
    # The same requests (the tenants are only in their events: the context has none)
    first = runtime.invoke(SHARED, {"mark": "left by 1"})
    other = runtime.invoke(SHARED, {"mark": "left by 10"})
    assert other["pid"] == first["pid"]
    assert other["cold_start"] is False
    assert other["marks"] == ["left by 1", "left by 10"]
    assert {first["tenant_id"], other["tenant_id"]} == {None}


def test_lambda_refuses_a_tenant_isolated_invocation_without_a_tenant_and_a_tenant_without_the_mode(
    runtime: FunctionRuntime,
) -> None:
    with pytest.raises(InvalidTenant) as without:
        runtime.invoke(ISOLATED, {})
    with pytest.raises(InvalidTenant) as needless:
        runtime.invoke(SHARED, {}, tenant_id="1")
    assert {without.value.error_type, needless.value.error_type} == {"InvalidParameterValueException"}
    assert runtime.pids() == {}  # refused before any environment started


def test_past_the_machines_bound_the_least_recently_used_idle_environment_ends() -> None:
    variables = lambda_environment(ISOLATED, ENDPOINT, {"AWS_ACCESS_KEY_ID": key_of("Isolated")}, "test-Isolated")
    environments = FunctionEnvironments(
        {ISOLATED.logical_id: ISOLATED}, {ISOLATED.logical_id: variables}, tenant_environments=1
    )
    try:
        first = environments.invoke(ISOLATED, {"mark": "left by 1"}, tenant_id="1")
        other = environments.invoke(ISOLATED, {}, tenant_id="10")
        # tenant 1's idle environment ended for tenant 10's: its next request is cold, its state gone
        assert environments.tenant_pids(ISOLATED.logical_id) == {"10": [other["pid"]]}
        back = environments.invoke(ISOLATED, {}, tenant_id="1")
        assert (back["pid"] != first["pid"], back["cold_start"], back["marks"]) == (True, True, [])
    finally:
        environments.stop()
