"""A deliberately broken handler, for the isolation tests only.

It makes the mistake the design forbids: it takes the tenant from the request
body and builds that tenant's keys, while (as every handler must) it reaches
DynamoDB only through the *caller's* tenant session. The IAM guard has to
stop it: no foreign item comes back, none is written.
"""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from support_tickets.api import create_app, current_caller, handle
from support_tickets.models import CreateTicketRequest, Ticket
from support_tickets.session import tenant_session
from support_tickets.settings import get_settings
from support_tickets.table import TenantTable
from support_tickets.ticket_repository import TicketRepository

app = create_app()


class LeakRequest(BaseModel):
    tenant_id: str  # the bug: a tenant from the body
    ticket_id: str | None = None


class CallersClients:
    """The caller's own tenant-scoped client, whatever tenant the repository names."""

    def __init__(self, caller_tenant: str) -> None:
        self._tenant = caller_tenant

    def dynamodb(self, tenant_id: str) -> Any:
        return tenant_session().dynamodb(self._tenant)

    def invalidate(self, tenant_id: str) -> None:
        tenant_session().invalidate(self._tenant)


@app.post("/leak")
def leak(request: Annotated[LeakRequest, Body()]) -> Ticket:
    caller = current_caller(app)
    table = TenantTable(request.tenant_id, get_settings().table_name, CallersClients(caller.tenant_id))
    repository = TicketRepository(table)
    if request.ticket_id is not None:
        return repository.get_ticket_summary(request.ticket_id)
    return repository.create_ticket(CreateTicketRequest(title="planted"), created_by=caller.username)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
