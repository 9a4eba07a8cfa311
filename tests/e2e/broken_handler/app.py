"""Deliberately broken handlers, for the isolation tests only.

Both make the mistake the design forbids, take the tenant from the request
body, and both reach DynamoDB the only way handler code can: with credentials
of the caller's own token (``support_tickets.data.session``). The IAM guard has to
stop them: no foreign item comes back, none is written.

- ``POST /leak``: builds the other tenant's *keys* (a repository for that
  tenant id) on the caller's token-bound clients.
- ``POST /impersonate``: a handler that picked the wrong tenant id for
  everything: it runs a route's domain operation for a caller whose tenant is
  the other one. Before credentials were bound to the token, this obtained
  credentials tagged with the other tenant and read and wrote its data.
"""

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from support_tickets.api.resolver import create_app, current_caller, handle
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import (
    AddCommentRequest,
    BatchStatusRequest,
    CreateTicketRequest,
    Ticket,
    UpdateTicketRequest,
)
from support_tickets.core.settings import get_settings
from support_tickets.data.session import tenant_clients
from support_tickets.data.table import TenantTable
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain import tickets

app = create_app()


class LeakRequest(BaseModel):
    tenant_id: str  # the bug: a tenant from the body
    ticket_id: str | None = None


@app.post("/leak")
def leak(request: Annotated[LeakRequest, Body()]) -> Ticket:
    caller = current_caller(app)
    clients = tenant_clients().for_caller(caller)
    repository = TicketRepository(TenantTable(request.tenant_id, get_settings().table_name, clients))
    if request.ticket_id is not None:
        return repository.get_ticket_summary(request.ticket_id)
    return repository.create_ticket(CreateTicketRequest(title="planted"), created_by=caller.username)


Route = Literal["create", "list", "get", "summary", "update", "comment", "batch", "delete", "aggregates"]


class ImpersonateRequest(BaseModel):
    tenant_id: str  # the bug: a tenant from the body, for everything
    route: Route
    ticket_id: str = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"


@app.post("/impersonate")
def impersonate(request: Annotated[ImpersonateRequest, Body()]) -> Any:
    caller = dataclasses.replace(current_caller(app), tenant_id=request.tenant_id, is_admin=True)
    ticket = request.ticket_id
    operations: dict[str, Callable[[], Any]] = {
        "create": lambda: tickets.create_ticket(caller, CreateTicketRequest(title="planted")),
        "list": lambda: tickets.list_tickets(caller, TicketStatus.OPEN, None, 25, None),
        "get": lambda: tickets.get_ticket(caller, ticket, 25, None),
        "summary": lambda: tickets.get_ticket_summary(caller, ticket),
        "update": lambda: tickets.update_ticket(caller, ticket, UpdateTicketRequest(title="defaced"), None),
        "comment": lambda: tickets.add_comment(caller, ticket, AddCommentRequest(body="planted")),
        "batch": lambda: tickets.change_status(
            caller, BatchStatusRequest(ticket_ids=[ticket], status=TicketStatus.CLOSED)
        ),
        "delete": lambda: tickets.delete_ticket(caller, ticket),
        "aggregates": lambda: tickets.get_aggregates(caller),
    }
    result = operations[request.route]()
    return {"done": request.route} if result is None else result


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
