"""The route table (ops/routes.py): one entry per route of the template, so
that every per-route suite covers every route."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ops.routes import NEEDS, api_routes, missing_entries, stale_entries, template_routes
from stack_model.template import template


@pytest.mark.parametrize("route", [route.key for route in template_routes()])
def test_route_table_has_an_entry_for_every_template_route(route: str) -> None:
    assert route not in missing_entries(), (
        f"{route} is routed by template.yaml but has no entry in ops.routes.NEEDS: "
        "add one (its name, success status, body, admin...) and every suite covers it"
    )


def test_route_table_has_no_entry_without_a_template_route() -> None:
    assert stale_entries() == [], "entries of ops.routes.NEEDS that template.yaml does not route"


def test_route_table_names_are_unique_and_each_route_is_one_function() -> None:
    names = [route.name for route in api_routes()]
    assert len(names) == len(set(names)) == len(NEEDS)
    functions = [route.function for route in api_routes()]
    assert len(functions) == len(set(functions)), "one route, one function (docs/architecture.md)"


def test_route_table_admin_routes_and_bodies_are_consistent() -> None:
    for route in api_routes():
        # A POST without a body is an action on the resource its path names
        # (POST /webhooks/{webhook_id}/secret): its last segment is a verb-like literal.
        action = route.path_parameter is not None and not route.path.endswith("}")
        if route.method == "POST":
            assert route.has_body or action, route.key
        else:
            assert route.has_body == (route.method in {"PATCH", "PUT"}), route.key
        assert route.names_ticket or not route.takes_ticket, route.key


def referenced(value: Any) -> set[str]:
    """The logical ids a template value names (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    if isinstance(value, dict):
        found = set()
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                found.add((item.split(".", 1) if isinstance(item, str) else item)[0])
            elif key == "Fn::Sub":
                text = item if isinstance(item, str) else item[0]
                found.update(name.split(".", 1)[0] for name in re.findall(r"\$\{([^}!]+)\}", text))
                found |= referenced(item)
            else:
                found |= referenced(item)
        return found
    if isinstance(value, list):
        return set().union(*(referenced(item) for item in value)) if value else set()
    return set()


@pytest.mark.parametrize("route", [route.key for route in template_routes()])
def test_a_route_is_three_places_of_the_template(route: str) -> None:
    """docs/testing.md's new-route checklist, item 2: a route's function, its path in
    TicketsApi's DefinitionBody, and its Lambda permission; nothing else of the
    template names the function (logs, alarms, dashboard, usage: for every function at once)."""
    (function,) = {found.function for found in template_routes() if found.key == route}
    resources = template()["Resources"]
    naming = {name for name, resource in resources.items() if function in referenced(resource)}
    assert function in resources
    assert naming == {"TicketsApi", f"{function}ApiPermission"}, route
    permission = resources[f"{function}ApiPermission"]
    assert permission["Properties"]["FunctionName"] == {"Ref": function}
