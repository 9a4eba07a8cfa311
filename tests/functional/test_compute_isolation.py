"""Lambda's tenant isolation mode, in the handlers (``TenantIsolationMode=PER_TENANT``,
docs/isolation.md): the Lambda context names the tenant whose execution
environment runs a request (``context.tenant_id``, from the ``X-Amz-Tenant-Id``
API Gateway maps from the authorizer's context). A request of another tenant's
caller is refused, 403 ``FORBIDDEN``, on every route, before it reads or
writes anything: a forged mismatch (a misconfigured mapping, a direct
invocation with another ``--tenant-id``). Its own tenant's environment, or no
tenant at all (the mode off), serves it as always."""

from __future__ import annotations

from typing import Any

import pytest

from ops.routes import by_name, route_names
from support_tickets.api.resolver import FOREIGN_ENVIRONMENT_MESSAGE
from tests.conftest import SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot

pytestmark = SHARED_AWS


@pytest.mark.parametrize(("caller", "environment"), TENANT_PAIRS)
@pytest.mark.parametrize("route", route_names())
def test_a_request_in_another_tenants_environment_is_refused_and_changes_nothing(
    api: Api, snapshot: Snapshot, route: str, caller: str, environment: str
) -> None:
    # Given: a ticket of the caller's tenant, and an admin of it (admin routes included)
    user = User(caller, "ada", admin=True)
    ticket = api.new_ticket(user)["ticket_id"]
    spec = by_name()[route]
    subject = ticket if spec.names_ticket or not spec.path_parameter else "none"
    before = snapshot()
    # When its request runs in an execution environment of the other tenant
    response = api.call(
        route,
        user,
        ticket_id=subject if spec.path_parameter else None,
        query=spec.needs.query or None,
        body=spec.body(ticket),
        environment_tenant=environment,
    )
    # Then it is refused before anything is read or written, naming neither tenant
    error = assert_error(response, 403, "FORBIDDEN")
    assert error["message"] == FOREIGN_ENVIRONMENT_MESSAGE
    assert environment not in str(response.body).replace(FOREIGN_ENVIRONMENT_MESSAGE, "")
    assert snapshot() == before


@pytest.mark.parametrize(("caller", "other"), TENANT_PAIRS)
def test_its_own_tenants_environment_serves_it_as_does_none(api: Api, caller: str, other: str) -> None:
    user = User(caller, "alice")
    # In its own tenant's environment (the mode on) and in a shared one (the mode off: no context tenant)
    created = api.call("create", user, body={"title": "mine"}, environment_tenant=caller)
    assert created.status == 201, created.body
    ticket: dict[str, Any] = created.body
    for environment in (caller, None):
        summary = api.call("summary", user, ticket_id=ticket["ticket_id"], environment_tenant=environment)
        assert (summary.status, summary.body) == (200, ticket)
    # and the other tenant, in its own environment, still finds nothing of it
    assert_error(
        api.call("summary", User(other, "bob"), ticket_id=ticket["ticket_id"], environment_tenant=other),
        404,
        "TICKET_NOT_FOUND",
    )
