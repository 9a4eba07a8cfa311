"""Deliberately broken handlers, for the isolation tests only.

Both make the mistake the design forbids, take the tenant from the request
body, and both reach DynamoDB the only way handler code can: with credentials
of the caller's own token (``support_tickets.data.session``). The IAM guard has to
stop them: no foreign item comes back, none is written.

- ``POST /leak``: builds the other tenant's *keys* (a repository for that
  tenant id) on the caller's token-bound clients.
- ``POST /impersonate``: a handler that picked the wrong tenant id for
  everything: it runs a route's real function (any route of the route table,
  ops/routes.py) for a caller whose tenant is the other one. Before
  credentials were bound to the token, this obtained credentials tagged with
  the other tenant and read and wrote its data.
"""

import dataclasses
import json
from collections.abc import Collection, Mapping
from typing import Any, ClassVar
from unittest import mock

from aws_lambda_powertools.utilities.typing import LambdaContext

from ops.routes import by_name
from stack_model.functions import function_specs, load_handler
from support_tickets.api import resolver
from support_tickets.api.resolver import create_app, current_caller, handle
from support_tickets.api.validation import RouteInput, read_input
from support_tickets.core.identity import Caller, caller_from_event
from support_tickets.core.models import CreateTicketRequest, Ticket
from support_tickets.core.settings import get_settings
from support_tickets.data.session import tenant_clients
from support_tickets.data.table import TenantTable
from support_tickets.data.ticket_repository import TicketRepository


@dataclasses.dataclass(frozen=True)
class LeakRequest:
    SCHEMA: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"tenant_id": {"type": "string"}, "ticket_id": {"type": ["string", "null"]}},
        "required": ["tenant_id"],
        "additionalProperties": False,
    }

    tenant_id: str  # the bug: a tenant from the body
    ticket_id: str | None = None


app = create_app(RouteInput(body=LeakRequest))


@app.post("/leak")
def leak() -> Ticket:
    request: LeakRequest = app.checked_input.body
    caller = current_caller(app)
    clients = tenant_clients().for_caller(caller)
    repository = TicketRepository(TenantTable(request.tenant_id, get_settings().table_name, clients))
    if request.ticket_id is not None:
        return repository.get_ticket_summary(request.ticket_id)
    return repository.create_ticket(CreateTicketRequest(title="planted"), created_by=caller.username)


@dataclasses.dataclass(frozen=True)
class ImpersonateRequest:
    SCHEMA: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"tenant_id": {"type": "string"}, "route": {"type": "string"}, "ticket_id": {"type": "string"}},
        "required": ["tenant_id", "route"],
        "additionalProperties": False,
    }

    tenant_id: str  # the bug: a tenant from the body, for everything
    route: str  # a route's name in the route table
    ticket_id: str = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"


def impersonate(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The route's own function, given the route's sample request, with the
    caller's verified identity but the body's tenant id (and admin rights)."""
    request: ImpersonateRequest = read_input(RouteInput(body=ImpersonateRequest), event).body
    route = by_name()[request.route]
    spec = function_specs()[route.function]
    handler = load_handler(spec.code_uri, spec.handler)
    body = route.body(request.ticket_id)
    inner = {
        **event,
        "httpMethod": route.method,
        "resource": route.path,
        "path": route.url(request.ticket_id),
        "pathParameters": route.path_parameters(request.ticket_id),
        "body": None if body is None else json.dumps(body),
    }

    def wrong_tenant(event: Mapping[str, Any], allowed_client_ids: Collection[str]) -> Caller:
        caller = caller_from_event(event, allowed_client_ids)
        return dataclasses.replace(caller, tenant_id=request.tenant_id, is_admin=True)

    with mock.patch.object(resolver, "caller_from_event", wrong_tenant):
        response: dict[str, Any] = handler(inner, context)
    return response


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("path") == "/impersonate":
        return impersonate(event, context)
    return handle(app, event, context)
