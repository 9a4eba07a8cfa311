"""Every request that reaches a tenant writes exactly one ``"request handled"``
line carrying its usage (docs/usage.md): its route, request id, memory, and
the DynamoDB units of every call it made, as DynamoDB answered them; whether
it succeeded, was refused or failed. The routes come from the route table, so
a new route is covered here with no edit."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any
from unittest import mock

import botocore.client
import pytest

from support_tickets.usage import meter
from tests.conftest import SHARED_AWS
from tests.functional.api_harness import ROUTES, Api, User, aws_fails, client_error, new_subject, sample_request

pytestmark = SHARED_AWS

ALL_ROUTES = sorted(ROUTES)


@pytest.fixture
def ticket_id(api: Api, user: User, request: pytest.FixtureRequest) -> str:
    """What the test's route is about: a new ticket, or a new webhook for a
    route whose path names one."""
    route = request.node.callspec.params.get("route") if hasattr(request.node, "callspec") else None
    return new_subject(api, route, user) if route is not None else str(api.new_ticket(user)["ticket_id"])


@contextmanager
def dynamodb_answers() -> Iterator[list[tuple[str, dict[str, Any], dict[str, Any]]]]:
    """Every DynamoDB call made while the block runs: (operation, params, answer)."""
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose
    seen: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def recording(client: Any, operation: str, params: Any) -> Any:
        answer = original(client, operation, params)
        if client.meta.service_model.service_name == "dynamodb":
            seen.append((operation, dict(params), answer))
        return answer

    with mock.patch.object(botocore.client.BaseClient, "_make_api_call", recording):
        yield seen


def _expected_units(seen: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> tuple[float, float]:
    """What DynamoDB (moto here) answered, summed by hand: reads are GetItem and Query."""
    read = write = Decimal(0)
    for operation, _, answer in seen:
        consumed = answer.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            units = Decimal(str(entry["CapacityUnits"]))
            if operation in ("GetItem", "Query"):
                read += units
            else:
                write += units
    return float(read), float(write)


def _usage_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("message") == "request handled"]


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_one_usage_line_per_request_with_every_calls_units(
    api: Api, user: User, ticket_id: str, route: str, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given a request of the route
    log_lines()
    with dynamodb_answers() as seen:
        response = sample_request(api, route, user, ticket_id)
    # Then it logged one usage line, for its tenant, route and request
    (line,) = _usage_lines(log_lines())
    spec = ROUTES[route]
    usage = line["usage"]
    assert line["tenant_id"] == user.tenant_id
    assert line["status"] == response.status
    assert usage["route"] == f"{spec.method} {spec.path}"
    assert usage["request_id"] == line["function_request_id"]
    assert usage["memory_mb"] > 0
    assert usage["duration_ms"] > 0
    # with the units DynamoDB answered to every call it made (each asked for them)
    assert seen, "every route reads or writes the table"
    metered = [params for operation, params, _ in seen if operation != "DescribeTable"]
    assert all(params.get("ReturnConsumedCapacity") == "TOTAL" for params in metered)
    assert usage["dynamodb_calls"] == len(metered)
    # (moto's figures in-process; the local stack's realistic ones: tests/e2e/test_usage.py)
    assert (usage["read_units"], usage["write_units"]) == _expected_units(seen)


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_a_failed_request_still_logs_one_usage_line(
    api: Api, user: User, ticket_id: str, route: str, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given requests that fail inside the handler (500) and before it (400)
    log_lines()
    with aws_fails("dynamodb", client_error("ValidationException")):
        failed = sample_request(api, route, user, ticket_id)
    refused = sample_request(api, route, user, ticket_id, query={"unknown": "1"})
    # Then each logged exactly one usage line, with its own request and outcome
    lines = _usage_lines(log_lines())
    assert [(line["correlation_id"], line["status"]) for line in lines] == [
        (failed.request_id, 500),
        (refused.request_id, 400),
    ]
    # (a refused call reports no units: DynamoDB answers none with an error)
    for line in lines:
        assert (line["usage"]["dynamodb_calls"], line["usage"]["read_units"], line["usage"]["write_units"]) == (0, 0, 0)
    assert len({line["usage"]["request_id"] for line in lines}) == 2


def test_requests_do_not_carry_units_over(
    api: Api, user: User, ticket_id: str, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given two requests in the same environment (the meter is per environment)
    log_lines()
    with dynamodb_answers() as first_calls:
        sample_request(api, "summary", user, ticket_id)
    with dynamodb_answers() as second_calls:
        sample_request(api, "summary", user, ticket_id)
    first, second = (line["usage"] for line in _usage_lines(log_lines()))
    # Then each line has its own request's units only
    assert (first["read_units"], first["write_units"]) == _expected_units(first_calls)
    assert (second["read_units"], second["write_units"]) == _expected_units(second_calls)


def test_units_are_split_into_reads_and_writes_exactly() -> None:
    # DynamoDB's own split when it gives one, else by the operation; lists summed.
    zero = Decimal(0)
    assert meter.split_units("query", {"CapacityUnits": 1.5}) == (Decimal("1.5"), zero)
    assert meter.split_units("put_item", {"CapacityUnits": 3.0}) == (zero, Decimal(3))
    assert meter.split_units(
        "transact_write_items", [{"CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}, {"CapacityUnits": 2.0}]
    ) == (zero, Decimal(6))
    assert meter.split_units("get_item", None) == (zero, zero)
    request_meter = meter.RequestMeter()
    for _ in range(10):
        request_meter.add("get_item", {"ConsumedCapacity": {"CapacityUnits": 0.1}})
    assert request_meter.current().read_units == Decimal(1)  # exact: no float drift


@pytest.mark.parametrize("route", ["create", "webhook_create"])
def test_a_body_over_the_limit_is_refused_and_logged_for_the_contexts_tenant(
    api: Api, user: User, route: str, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given a request over 64 KiB with a valid authorizer context (API Gateway ran
    # the authorizer: the request and the function's invocation are billed)
    log_lines()
    too_large = api.call(route, user.as_admin(), raw_body=json.dumps({"title": "x" * (64 * 1024)}))
    assert too_large.status == 413
    # Then it logged its one usage line, under the context's tenant, with its 413
    (line,) = _usage_lines(log_lines())
    spec = ROUTES[route]
    assert (line["tenant_id"], line["status"]) == (user.tenant_id, 413)
    assert line["usage"]["route"] == f"{spec.method} {spec.path}"
    assert (line["usage"]["dynamodb_calls"], line["usage"]["read_units"], line["usage"]["write_units"]) == (0, 0, 0)
    # and one whose context is no valid caller (a bypassed authorizer naming a tenant,
    # no user, token or credentials) is still a 413, not a 401, and logged under nobody
    forged = api.call(route, None, context={"tenant_id": user.tenant_id}, raw_body="x" * (64 * 1024 + 1))
    assert forged.status == 413
    assert _usage_lines(log_lines()) == []
