"""Every route of the API, from one source: the template's API definition
(method, path, function: :mod:`stack_model.api`) joined with :data:`NEEDS`,
the one table of what each route needs that the template cannot say (a valid
body, admin or not, its success status, its own errors).

Every per-route list is derived from :func:`api_routes`: the in-process API
harness, the isolation, hostile-input, sharding, contract and suspension
suites, the OpenAPI expectations, the sample events and the benchmark's
routes. A route added to the template without an entry here fails
``tests/unit/test_route_table.py`` with its method and path; with an entry,
every suite covers it with no further edit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stack_model.api import integrations
from stack_model.template import template

# Stands for the route's ticket id in a sample body (e.g. the batch route's list).
TICKET = "<ticket_id>"
PATH_PARAMETER = "ticket_id"
# A route whose path names two ids (a webhook's delivery) takes its subject as
# "<webhook_id>/<delivery_id>": one string, like every other route's subject.
SUBJECT_SEPARATOR = "/"
MISSING_DELIVERY = "none"
# Errors every route can answer (API.md's table): the request, the token, the
# body's size, throttling, a dependency down.
COMMON_ERRORS = frozenset({400, 401, 403, 413, 429, 503})


@dataclass(frozen=True)
class Needs:
    """What a route needs that its template event does not say."""

    name: str  # the short name tests and tables use ("get", "batch")
    success: int = 200
    response: str | None = None  # the success body's schema name in docs/openapi.json
    errors: frozenset[int] = frozenset()  # the route's own errors, beyond COMMON_ERRORS
    body: Any = None  # a minimal valid JSON body; TICKET stands for the route's ticket id
    query: dict[str, str] = field(default_factory=dict)  # a typical query (sample events)
    headers: dict[str, str] = field(default_factory=dict)  # a typical header set (sample events)
    admin: bool = False  # only the tenant's admins may call it (403 FORBIDDEN for members)
    # The DynamoDB call that does the route's work: one per request, unless scatter.
    operation: str = "Query"
    # Reads several partitions by design (the trail: 8 a day), in parallel.
    scatter: bool = False
    # Encrypts a new webhook secret: one kms:Encrypt per request, with the caller's credentials.
    encrypts: bool = False


_TICKET_PATH = "/tickets/{ticket_id}"

NEEDS: dict[tuple[str, str], Needs] = {
    ("POST", "/tickets"): Needs(
        "create", 201, "Ticket", frozenset({409}), body={"title": "Printer on fire"}, operation="PutItem"
    ),
    ("GET", "/tickets"): Needs("list", response="TicketPage", query={"status": "OPEN", "limit": "25"}),
    ("GET", _TICKET_PATH): Needs("get", response="TicketWithComments", errors=frozenset({404}), query={"limit": "10"}),
    ("GET", _TICKET_PATH + "/summary"): Needs(
        "summary", response="Ticket", errors=frozenset({404}), operation="GetItem"
    ),
    ("PATCH", _TICKET_PATH): Needs(
        "update",
        response="Ticket",
        errors=frozenset({404, 409, 412}),
        body={"title": "mine now"},
        operation="UpdateItem",
    ),
    ("POST", _TICKET_PATH + "/comments"): Needs(
        "comment", 201, "Comment", frozenset({404, 409}), body={"body": "hello"}, operation="TransactWriteItems"
    ),
    ("POST", "/tickets/status"): Needs(
        "batch",
        response="BatchStatusResponse",
        errors=frozenset({404, 409}),
        body={"ticket_ids": [TICKET], "status": "CLOSED"},
        operation="TransactWriteItems",
    ),
    ("DELETE", _TICKET_PATH): Needs("delete", 204, None, frozenset({404}), admin=True, operation="TransactWriteItems"),
    ("GET", "/aggregates"): Needs("aggregates", response="AggregatesResponse", admin=True),
    ("GET", _TICKET_PATH + "/history"): Needs(
        "history", response="AuditPage", errors=frozenset({404}), query={"limit": "25"}
    ),
    ("GET", "/audit"): Needs("audit", response="AuditPage", admin=True, query={"limit": "50"}, scatter=True),
    # Webhooks (docs/webhooks.md): {webhook_id} routes name a webhook, never a ticket.
    ("POST", "/webhooks"): Needs(
        "webhook_create",
        201,
        "CreatedWebhook",
        frozenset({409}),
        # A public address: no DNS lookup in any suite.
        body={"url": "https://93.184.215.14/in", "events": ["ticket.created"]},
        admin=True,
        operation="TransactWriteItems",
        encrypts=True,
    ),
    ("GET", "/webhooks"): Needs("webhook_list", response="WebhookPage", admin=True),
    ("DELETE", "/webhooks/{webhook_id}"): Needs(
        "webhook_delete", 204, None, frozenset({404}), admin=True, operation="TransactWriteItems"
    ),
    ("POST", "/webhooks/{webhook_id}/secret"): Needs(
        "webhook_secret",
        response="RotatedSecret",
        errors=frozenset({404}),
        admin=True,
        operation="UpdateItem",
        encrypts=True,
    ),
    # Usage (docs/usage.md): a day the sample events' clock has seen (they are fixed).
    ("GET", "/usage"): Needs("usage", response="UsageResponse", admin=True, query={"day": "2026-11-21"}),
    # The webhook's existence is read first (404 WEBHOOK_NOT_FOUND), then its deliveries.
    ("GET", "/webhooks/{webhook_id}/deliveries"): Needs(
        "webhook_deliveries",
        response="DeliveryPage",
        errors=frozenset({404}),
        admin=True,
        query={"limit": "25"},
    ),
    ("POST", "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): Needs(
        "webhook_redeliver", 202, None, frozenset({404}), admin=True, operation="UpdateItem"
    ),
}


@dataclass(frozen=True)
class TemplateRoute:
    """One route of the template (a path and method of the API's definition)."""

    method: str
    path: str
    function: str  # the function's logical id
    code_uri: str  # its directory, relative to the project

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class ApiRoute(TemplateRoute):
    """A template route with its entry of :data:`NEEDS`."""

    needs: Needs

    @property
    def name(self) -> str:
        return self.needs.name

    @property
    def function_dir(self) -> str:
        """``create_ticket`` for ``functions/create_ticket`` (sample event files are named by it)."""
        return Path(self.code_uri).name

    @property
    def path_parameter(self) -> str | None:
        """The (first) id its path names (``ticket_id``, ``webhook_id``), if any."""
        names = self.path_parameter_names
        return names[0] if names else None

    @property
    def path_parameter_names(self) -> list[str]:
        """Every id its path names, in order (``webhook_id``, ``delivery_id``)."""
        return [part[1:-1] for part in self.path.split("/") if part.startswith("{") and part.endswith("}")]

    @property
    def takes_delivery(self) -> bool:
        """The path names a webhook's delivery (its subject is ``<webhook_id>/<delivery_id>``)."""
        return "delivery_id" in self.path_parameter_names

    @property
    def takes_webhook(self) -> bool:
        """The path names a webhook (``{webhook_id}``)."""
        return self.path_parameter == "webhook_id"

    @property
    def takes_ticket(self) -> bool:
        """The path names a ticket (``{ticket_id}``)."""
        return "{" + PATH_PARAMETER + "}" in self.path

    @property
    def names_ticket(self) -> bool:
        """The request names a ticket, in its path or its body: another
        tenant's ticket there is 404 TICKET_NOT_FOUND. The other routes answer
        about the caller's own tenant, whatever the request says."""
        return self.takes_ticket or TICKET in json.dumps(self.needs.body)

    @property
    def has_body(self) -> bool:
        return self.needs.body is not None

    @property
    def read_only(self) -> bool:
        return self.method == "GET"

    def body(self, ticket_id: str) -> Any:
        """The route's sample body about ``ticket_id`` (None if it takes none)."""
        if self.needs.body is None:
            return None
        return json.loads(json.dumps(self.needs.body).replace(TICKET, ticket_id))

    def path_parameters(self, ticket_id: str) -> dict[str, str] | None:
        """The path's parameters from the route's subject ``ticket_id``: a ticket's
        or a webhook's id, or ``<webhook_id>/<delivery_id>`` for a delivery's route
        (a subject without the separator names the delivery ``none``: a missing one)."""
        names = self.path_parameter_names
        if not names:
            return None
        values = ticket_id.split(SUBJECT_SEPARATOR, len(names) - 1) if len(names) > 1 else [ticket_id]
        values += [MISSING_DELIVERY] * (len(names) - len(values))
        return dict(zip(names, values, strict=True))

    def url(self, ticket_id: str) -> str:
        """The request path, with the subject ``ticket_id`` in place of its parameters
        (``{ticket_id}``, or ``{webhook_id}``: then it names a webhook)."""
        path = self.path
        for name, value in (self.path_parameters(ticket_id) or {}).items():
            path = path.replace("{" + name + "}", value)
        return path


def template_routes() -> list[TemplateRoute]:
    """Every route of ``template.yaml`` (the API's definition, :mod:`stack_model.api`), in the template's order."""
    resources = template()["Resources"]
    return [
        TemplateRoute(
            method=route.method,
            path=route.path,
            function=route.function,
            code_uri=str(resources[route.function]["Properties"]["CodeUri"]),
        )
        for route in integrations()
    ]


def missing_entries() -> list[str]:
    """``METHOD /path`` of each template route with no entry in :data:`NEEDS`."""
    return [route.key for route in template_routes() if (route.method, route.path) not in NEEDS]


def stale_entries() -> list[str]:
    """``METHOD /path`` of each entry of :data:`NEEDS` that the template does not route."""
    routed = {(route.method, route.path) for route in template_routes()}
    return [f"{method} {path}" for method, path in NEEDS if (method, path) not in routed]


@cache
def api_routes() -> tuple[ApiRoute, ...]:
    """Every route of the template with what it needs, in the template's order.

    A route with no entry is left out here, so that collecting the suites does
    not fail on it everywhere at once: ``test_route_table`` fails on it alone,
    by its method and path."""
    return tuple(
        ApiRoute(route.method, route.path, route.function, route.code_uri, NEEDS[(route.method, route.path)])
        for route in template_routes()
        if (route.method, route.path) in NEEDS
    )


def by_name() -> dict[str, ApiRoute]:
    return {route.name: route for route in api_routes()}


def route_names() -> list[str]:
    """Every route's short name, sorted (stable test ids)."""
    return sorted(route.name for route in api_routes())
