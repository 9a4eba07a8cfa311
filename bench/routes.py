"""Every API route as a benchmark scenario: data each needs, and the REST
event of its n-th request (API Gateway's shape: a real ID token of the local
user pool in ``Authorization`` and its claims, see ``stack_model.events.with_token``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local_stack.lambda_.runtime import LambdaContext
from ops.routes import SUBJECT_SEPARATOR, ApiRoute, api_routes
from ops.sample_events import delivery_item, sample_delivery_id
from stack_model.events import rest_event, with_token
from stack_model.functions import FunctionSpec, Handler, load_handler
from support_tickets.core.identity import TenantCredentials

COMMENTS_PER_TICKET = 5
SETUP_RETRIES: list[str] = []
BATCH_SIZE = 10
LIST_TICKETS = 30

# (tenant, user, admin) -> that user's ID token
Tokens = Callable[[str, str, bool], str]


@dataclass
class Invoker:
    """The API functions, loaded once in this process (the warm containers)."""

    specs: dict[str, FunctionSpec]
    _handlers: dict[str, Handler] = field(default_factory=dict)

    def handler(self, logical_id: str) -> Handler:
        if logical_id not in self._handlers:
            spec = self.specs[logical_id]
            self._handlers[logical_id] = load_handler(spec.code_uri, spec.handler, module_name=f"_bench_{logical_id}")
        return self._handlers[logical_id]

    def context(self, logical_id: str) -> LambdaContext:
        spec = self.specs[logical_id]
        return LambdaContext(function_name=logical_id, memory_limit_in_mb=spec.memory_mb, timeout_s=spec.timeout_s)

    def call(self, logical_id: str, event: dict[str, Any], expect: int) -> dict[str, Any]:
        """Set-up requests: a 409 (the emulator sometimes cancels a transaction
        under load) is retried, counted in :data:`SETUP_RETRIES`."""
        for _ in range(3):
            response: dict[str, Any] = self.handler(logical_id)(event, self.context(logical_id))
            if response.get("statusCode") != 409:
                break
            SETUP_RETRIES.append(f"{logical_id}: {response.get('body')}")
        check(response, expect)
        return response


def check(response: dict[str, Any], expect: int) -> None:
    if response.get("statusCode") != expect:
        raise RuntimeError(f"expected {expect}, got {response.get('statusCode')}: {response.get('body')}")


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"]) if response.get("body") else None


def _bound(make: Callable[..., dict[str, Any]], *args: Any) -> Callable[[int], dict[str, Any]]:
    """``make(n, *args)`` as a function of ``n`` (binds the values now, not late)."""
    return lambda n: make(n, *args)


@dataclass
class Route:
    """One route: ``event(n)`` is its n-th request (n counts across designs)."""

    name: str
    function: str
    expect: int
    read_only: bool
    event: Callable[[int], dict[str, Any]]
    # Fraction of the runs this route gets (a slow route needs fewer to be stable).
    share: float = 1.0
    # Reads several partitions by design (the tenant's trail: 8 a day), so it is
    # not held to "one DynamoDB call per read request".
    scatter: bool = False


class Fixtures:
    """Each route gets its own tenant and data, created through the real
    handlers (ours) before anything is measured."""

    def __init__(
        self,
        invoker: Invoker,
        tenant_prefix: str,
        tokens: Tokens,
        credentials: Callable[[str], TenantCredentials],
        seed: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.invoker = invoker
        self.prefix = tenant_prefix
        self.tokens = tokens
        self.credentials = credentials
        # Puts an item as the operator: a webhook delivery, which only the delivery function makes.
        self.seed = seed

    def event(
        self, method: str, resource: str, tenant_id: str, user: str, *, admin: bool = False, **kwargs: Any
    ) -> dict[str, Any]:
        """A request of ``user`` of ``tenant_id``, as API Gateway passes it on."""
        token = self.tokens(tenant_id, user, admin)
        return with_token(rest_event(method, resource, **kwargs), token, self.credentials(token))

    def tenant(self, route: str) -> tuple[str, str]:
        # User names are global to the pool: one per tenant.
        name = route.replace("_", "-")  # a tenant id has no "_" (webhook_list)
        return f"{self.prefix}-{name}", f"user-{self.prefix}-{name}"

    def create(self, tenant_id: str, user: str, title: str, comments: int = 0) -> str:
        event = self.event(
            "POST",
            "/tickets",
            tenant_id,
            user,
            body=json.dumps({"title": title, "description": "Benchmark ticket. " * 8, "resolver": "johnd"}),
        )
        ticket_id = str(body(self.invoker.call("CreateTicketFunction", event, 201))["ticket_id"])
        for number in range(comments):
            self.comment(tenant_id, user, ticket_id, number)
        return ticket_id

    def create_webhook(self, tenant_id: str, user: str) -> str:
        """A webhook of ``tenant_id`` (its user as an admin), through the real handler."""
        sample = next(route for route in api_routes() if route.name == "webhook_create")
        event = self.event("POST", "/webhooks", tenant_id, user, admin=True, body=json.dumps(sample.body("")))
        return str(body(self.invoker.call("CreateWebhookFunction", event, 201))["webhook_id"])

    def comment(self, tenant_id: str, user: str, ticket_id: str, number: int) -> None:
        event = self.event(
            "POST",
            "/tickets/{ticket_id}/comments",
            tenant_id,
            user,
            path_parameters={"ticket_id": ticket_id},
            body=json.dumps({"body": f"Comment {number}: it is still on fire."}),
        )
        self.invoker.call("AddCommentFunction", event, 201)

    def routes(self, deletes: int, only: set[str] | None = None) -> list[Route]:
        """Every route (or those of the functions in ``only``), with data for
        ``deletes`` DELETE requests."""

        def wanted(function: str) -> bool:
            return only is None or function in only

        made = self._read_routes(wanted) + self._write_routes(wanted, deletes)
        return made + self._table_routes(wanted, {route.function for route in made})

    def _table_routes(self, wanted: Callable[[str], bool], done: set[str]) -> list[Route]:
        """The routes of the route table (ops/routes.py) with no scenario of
        their own above: the table's sample request, on a ticket of their own
        tenant where the route names one."""
        made: list[Route] = []
        for route in api_routes():
            if route.function in done or not wanted(route.function):
                continue
            tenant, user = self.tenant(route.name)
            if route.takes_webhook:
                ticket_id = self.create_webhook(tenant, user)
                # A delivery of it (only the delivery function makes them): what the
                # deliveries list reads and a redelivery acts on.
                assert self.seed is not None, "the webhook routes need a delivery: Fixtures(seed=...)"
                self.seed(delivery_item(tenant, ticket_id))
                if route.takes_delivery:
                    ticket_id = f"{ticket_id}{SUBJECT_SEPARATOR}{sample_delivery_id(ticket_id)}"
            else:
                ticket_id = self.create(tenant, user, "Printer on fire") if route.names_ticket else ""

            def request(n: int, t: str, u: str, i: str, r: ApiRoute) -> dict[str, Any]:
                payload = r.body(i)
                return self.event(
                    r.method,
                    r.path,
                    t,
                    u,
                    admin=r.needs.admin,
                    path_parameters=r.path_parameters(i),
                    body=None if payload is None else json.dumps(payload),
                )

            made.append(
                Route(
                    bench_name(route),
                    route.function,
                    route.needs.success,
                    route.read_only,
                    _bound(request, tenant, user, ticket_id, route),
                )
            )
        return made

    def _read_routes(self, wanted: Callable[[str], bool]) -> list[Route]:
        made: list[Route] = []
        if wanted("GetTicketSummaryFunction"):
            tenant, user = self.tenant("summary")
            summary_id = self.create(tenant, user, "Printer on fire")
            made.append(
                Route(
                    "GET /tickets/{id}/summary",
                    "GetTicketSummaryFunction",
                    200,
                    True,
                    _bound(
                        lambda n, t, u, i: self.event(
                            "GET", "/tickets/{ticket_id}/summary", t, u, path_parameters={"ticket_id": i}
                        ),
                        tenant,
                        user,
                        summary_id,
                    ),
                )
            )

        if wanted("GetTicketFunction"):
            tenant, user = self.tenant("get")
            get_id = self.create(tenant, user, "Printer on fire", comments=COMMENTS_PER_TICKET)
            made.append(
                Route(
                    "GET /tickets/{id}",
                    "GetTicketFunction",
                    200,
                    True,
                    _bound(
                        lambda n, t, u, i: self.event(
                            "GET", "/tickets/{ticket_id}", t, u, path_parameters={"ticket_id": i}
                        ),
                        tenant,
                        user,
                        get_id,
                    ),
                )
            )

        if wanted("ListTicketsFunction"):
            tenant, user = self.tenant("list")
            for number in range(LIST_TICKETS):
                self.create(tenant, user, f"Open ticket {number}")
            made.append(
                Route(
                    "GET /tickets",
                    "ListTicketsFunction",
                    200,
                    True,
                    _bound(
                        lambda n, t, u: self.event("GET", "/tickets", t, u, query={"status": "OPEN", "limit": "25"}),
                        tenant,
                        user,
                    ),
                )
            )

        if wanted("GetTicketHistoryFunction"):
            tenant, user = self.tenant("history")
            history_id = self.create(tenant, user, "Printer on fire", comments=COMMENTS_PER_TICKET)
            made.append(
                Route(
                    "GET /tickets/{id}/history",
                    "GetTicketHistoryFunction",
                    200,
                    True,
                    _bound(
                        lambda n, t, u, i: self.event(
                            "GET", "/tickets/{ticket_id}/history", t, u, path_parameters={"ticket_id": i}
                        ),
                        tenant,
                        user,
                        history_id,
                    ),
                )
            )

        if wanted("GetAuditTrailFunction"):
            tenant, user = self.tenant("audit")
            for number in range(LIST_TICKETS):
                self.create(tenant, user, f"Audited ticket {number}")
            made.append(
                Route(
                    "GET /audit",
                    "GetAuditTrailFunction",
                    200,
                    True,
                    _bound(lambda n, t, u: self.event("GET", "/audit", t, u, admin=True), tenant, user),
                    scatter=True,
                )
            )

        if wanted("GetAggregatesFunction"):
            tenant, user = self.tenant("aggregates")
            for number in range(LIST_TICKETS):
                self.create(tenant, user, f"Counted ticket {number}")
            made.append(
                Route(
                    "GET /aggregates",
                    "GetAggregatesFunction",
                    200,
                    True,
                    _bound(lambda n, t, u: self.event("GET", "/aggregates", t, u, admin=True), tenant, user),
                )
            )

        return made

    def _write_routes(self, wanted: Callable[[str], bool], deletes: int) -> list[Route]:
        made: list[Route] = []
        if wanted("CreateTicketFunction"):
            tenant, user = self.tenant("create")
            made.append(
                Route(
                    "POST /tickets",
                    "CreateTicketFunction",
                    201,
                    False,
                    _bound(
                        lambda n, t, u: self.event(
                            "POST",
                            "/tickets",
                            t,
                            u,
                            body=json.dumps({"title": f"Ticket {n}", "description": "Benchmark ticket. " * 8}),
                        ),
                        tenant,
                        user,
                    ),
                )
            )

        if wanted("UpdateTicketFunction"):
            tenant, user = self.tenant("update")
            update_id = self.create(tenant, user, "Printer on fire")
            made.append(
                Route(
                    "PATCH /tickets/{id}",
                    "UpdateTicketFunction",
                    200,
                    False,
                    _bound(
                        lambda n, t, u, i: self.event(
                            "PATCH",
                            "/tickets/{ticket_id}",
                            t,
                            u,
                            path_parameters={"ticket_id": i},
                            body=json.dumps({"title": f"Printer on fire, take {n}"}),
                        ),
                        tenant,
                        user,
                        update_id,
                    ),
                )
            )

        if wanted("AddCommentFunction"):
            tenant, user = self.tenant("comment")
            comment_id = self.create(tenant, user, "Printer on fire")
            made.append(
                Route(
                    "POST /tickets/{id}/comments",
                    "AddCommentFunction",
                    201,
                    False,
                    _bound(
                        lambda n, t, u, i: self.event(
                            "POST",
                            "/tickets/{ticket_id}/comments",
                            t,
                            u,
                            path_parameters={"ticket_id": i},
                            body=json.dumps({"body": f"Comment {n}: it is still on fire."}),
                        ),
                        tenant,
                        user,
                        comment_id,
                    ),
                )
            )

        if wanted("BatchUpdateStatusFunction"):
            tenant, user = self.tenant("status")
            batch = [self.create(tenant, user, f"Batch ticket {number}") for number in range(BATCH_SIZE)]
            made.append(
                Route(
                    f"POST /tickets/status ({BATCH_SIZE} ids)",
                    "BatchUpdateStatusFunction",
                    200,
                    False,
                    _bound(
                        lambda n, t, u, ids: self.event(
                            "POST",
                            "/tickets/status",
                            t,
                            u,
                            body=json.dumps({"ticket_ids": ids, "status": "IN_PROGRESS" if n % 2 == 0 else "OPEN"}),
                        ),
                        tenant,
                        user,
                        batch,
                    ),
                    share=0.2,
                )
            )

        # A tenant has at most 10 webhooks (MAX_WEBHOOKS): the n-th create, and the
        # n-th delete's webhook, are in tenant n // 10 of the route's own.
        per_tenant = 10
        if wanted("CreateWebhookFunction"):
            tenant, user = self.tenant("webhook-create")
            sample = next(route for route in api_routes() if route.name == "webhook_create")
            made.append(
                Route(
                    "POST /webhooks",
                    "CreateWebhookFunction",
                    201,
                    False,
                    _bound(
                        lambda n, t, u, b: self.event(
                            "POST", "/webhooks", f"{t}-{n // per_tenant}", f"{u}-{n // per_tenant}", admin=True, body=b
                        ),
                        tenant,
                        user,
                        json.dumps(sample.body("")),
                    ),
                )
            )

        if wanted("DeleteWebhookFunction"):
            tenant, user = self.tenant("webhook-delete")
            hooks = [(f"{tenant}-{n // per_tenant}", f"{user}-{n // per_tenant}") for n in range(deletes)]
            doomed_hooks = [(t, u, self.create_webhook(t, u)) for t, u in hooks]
            made.append(
                Route(
                    "DELETE /webhooks/{id}",
                    "DeleteWebhookFunction",
                    204,
                    False,
                    _bound(
                        lambda n, ids: self.event(
                            "DELETE",
                            "/webhooks/{webhook_id}",
                            ids[n][0],
                            ids[n][1],
                            admin=True,
                            path_parameters={"webhook_id": ids[n][2]},
                        ),
                        doomed_hooks,
                    ),
                )
            )

        if wanted("DeleteTicketFunction"):
            tenant, user = self.tenant("delete")
            doomed = [self.create(tenant, user, f"Doomed {number}", comments=2) for number in range(deletes)]
            made.append(
                Route(
                    "DELETE /tickets/{id} (2 comments)",
                    "DeleteTicketFunction",
                    204,
                    False,
                    _bound(
                        lambda n, t, u, ids: self.event(
                            "DELETE", "/tickets/{ticket_id}", t, u, admin=True, path_parameters={"ticket_id": ids[n]}
                        ),
                        tenant,
                        user,
                        doomed,
                    ),
                )
            )

        return made


def bench_name(route: ApiRoute) -> str:
    """``GET /tickets/{id}/summary``: how the results name a route (``{id}`` for each of its ids)."""
    return f"{route.method} {route.url(SUBJECT_SEPARATOR.join('{id}' for _ in route.path_parameter_names) or '{id}')}"
