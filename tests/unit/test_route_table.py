"""The route table (ops/routes.py): one entry per route of the template, so
that every per-route suite covers every route."""

from __future__ import annotations

import pytest

from ops.routes import NEEDS, api_routes, missing_entries, stale_entries, template_routes


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
