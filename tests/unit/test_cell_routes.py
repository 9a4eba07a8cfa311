"""The router's store as the operator's commands write it (ops.cell_routes): each write
conditional on the store's version and tried again when someone else wrote first, a
tenant's entry never replaced by an older epoch (two commands racing leave the newest
route), the same write twice a no-op; and what it writes is what the edge router reads
(the router run under Node on a store made here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ops import cell_routes
from ops.cell_routes import (
    RouteConflict,
    drop_tenant_route,
    publish_cell_origin,
    publish_tenant_route,
    tenant_route,
    tenant_route_key,
)
from tests.unit.test_edge_router import Case, bearer, run_router, to

ARN = "arn:aws:cloudfront::123456789012:key-value-store/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
DOMAIN = "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "PutKey")


class FakeStore:
    """The cloudfront-keyvaluestore API's semantics that matter here: a version (ETag)
    that every write changes, a write refused (ConflictException) unless it names the
    current version, a missing key a ResourceNotFoundException. ``before_put`` runs
    between a caller's reads and its write: another writer's turn."""

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self.items = dict(items or {})
        self.version = 1
        self.writes: list[tuple[str, str]] = []
        self.before_put: Callable[[], None] = lambda: None

    def describe_key_value_store(self, **kwargs: str) -> Mapping[str, Any]:
        assert kwargs == {"KvsARN": ARN}
        return {"ETag": f"E{self.version}", "ItemCount": len(self.items)}

    def get_key(self, **kwargs: str) -> Mapping[str, Any]:
        assert kwargs["KvsARN"] == ARN
        if kwargs["Key"] not in self.items:
            raise client_error("ResourceNotFoundException")
        return {"Key": kwargs["Key"], "Value": self.items[kwargs["Key"]]}

    def put_key(self, **kwargs: str) -> Mapping[str, Any]:
        assert kwargs["KvsARN"] == ARN
        self.before_put()
        if kwargs["IfMatch"] != f"E{self.version}":
            raise client_error("ConflictException")
        self.write(kwargs["Key"], kwargs["Value"])
        return {"ETag": f"E{self.version}"}

    def delete_key(self, **kwargs: str) -> Mapping[str, Any]:
        assert kwargs["KvsARN"] == ARN
        self.before_put()
        if kwargs["IfMatch"] != f"E{self.version}":
            raise client_error("ConflictException")
        if kwargs["Key"] not in self.items:
            raise client_error("ResourceNotFoundException")
        del self.items[kwargs["Key"]]
        self.version += 1
        return {"ETag": f"E{self.version}"}

    def write(self, key: str, value: str) -> None:
        self.items[key] = value
        self.version += 1
        self.writes.append((key, value))


def epoch(store: FakeStore, tenant: str) -> int:
    stored: int = json.loads(store.items[tenant_route_key(tenant)])["epoch"]
    return stored


def test_a_tenants_first_route_is_written() -> None:
    store = FakeStore()
    assert publish_tenant_route(store, ARN, "acme", "cell-a", 1) is True
    assert store.items == {"tenant/acme": '{"cell":"cell-a","epoch":1}'}


def test_the_same_route_again_writes_nothing() -> None:
    """A command interrupted after the store write, run again: no version change."""
    store = FakeStore()
    publish_tenant_route(store, ARN, "acme", "cell-a", 4)
    assert publish_tenant_route(store, ARN, "acme", "cell-a", 4) is False
    assert len(store.writes) == 1


def test_a_later_epoch_moves_the_tenant_and_an_earlier_one_never_comes_back() -> None:
    store = FakeStore()
    publish_tenant_route(store, ARN, "acme", "cell-a", 4)
    assert publish_tenant_route(store, ARN, "acme", "cell-b", 5) is True
    assert publish_tenant_route(store, ARN, "acme", "cell-a", 4) is False
    assert store.items["tenant/acme"] == tenant_route("cell-b", 5)


def test_a_racing_newer_move_wins_whoever_writes_last() -> None:
    """Between this command's reads and its write (epoch 8), another writes epoch 9: the
    write fails its condition, the retry reads 9 and leaves it."""
    store = FakeStore({"tenant/acme": tenant_route("cell-a", 7)})

    def newer_move() -> None:
        store.before_put = lambda: None
        store.write("tenant/acme", tenant_route("cell-c", 9))

    store.before_put = newer_move
    assert publish_tenant_route(store, ARN, "acme", "cell-b", 8) is False
    assert store.items["tenant/acme"] == tenant_route("cell-c", 9)


def test_a_write_to_another_key_in_between_is_retried_and_lands() -> None:
    store = FakeStore({"tenant/acme": tenant_route("cell-a", 7)})

    def other_tenant() -> None:
        store.before_put = lambda: None
        store.write("tenant/globex", tenant_route("cell-a", 1))

    store.before_put = other_tenant
    assert publish_tenant_route(store, ARN, "acme", "cell-b", 8) is True
    assert (epoch(store, "acme"), epoch(store, "globex")) == (8, 1)


def test_a_store_that_keeps_moving_is_an_error_not_a_blind_write() -> None:
    store = FakeStore()
    store.before_put = lambda: store.write("tenant/other", "{}")
    with pytest.raises(RouteConflict):
        publish_tenant_route(store, ARN, "acme", "cell-a", 1)
    assert "tenant/acme" not in store.items
    assert len(store.writes) == cell_routes.ATTEMPTS


def test_a_dropped_route_goes_whatever_its_epoch_retried_over_a_racing_write() -> None:
    store = FakeStore({"tenant/acme": tenant_route("cell-a", 7)})

    def other_tenant() -> None:
        store.before_put = lambda: None
        store.write("tenant/globex", "{}")

    store.before_put = other_tenant
    assert drop_tenant_route(store, ARN, "acme") is True
    assert store.items == {"tenant/globex": "{}"}
    assert drop_tenant_route(store, ARN, "acme") is False
    store.before_put = lambda: store.write("tenant/other", "{}")
    store.items["tenant/acme"] = tenant_route("cell-a", 8)
    with pytest.raises(RouteConflict):
        drop_tenant_route(store, ARN, "acme")
    assert "tenant/acme" in store.items


def test_an_unreadable_entry_is_replaced() -> None:
    store = FakeStore({"tenant/acme": "cell-a"})
    assert publish_tenant_route(store, ARN, "acme", "cell-b", 1) is True
    assert epoch(store, "acme") == 1


def test_other_errors_are_not_retried() -> None:
    store = FakeStore()

    def denied() -> None:
        raise client_error("AccessDeniedException")

    store.before_put = denied
    with pytest.raises(ClientError, match="AccessDeniedException"):
        publish_tenant_route(store, ARN, "acme", "cell-a", 1)


def test_a_cells_origin_is_written_once_and_replaced_when_it_changes() -> None:
    store = FakeStore()
    assert publish_cell_origin(store, ARN, "cell-a", DOMAIN, "v1") is True
    assert publish_cell_origin(store, ARN, "cell-a", DOMAIN, "v1") is False
    assert publish_cell_origin(store, ARN, "cell-a", "f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com", "v1") is True
    assert json.loads(store.items["cell/cell-a"]) == {
        "domain": "f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com",
        "path": "/v1",
    }


@pytest.mark.parametrize(
    "write",
    [
        lambda store: publish_tenant_route(store, ARN, "Acme", "cell-a", 1),
        lambda store: publish_tenant_route(store, ARN, "acme", "cell/a", 1),
        lambda store: publish_tenant_route(store, ARN, "acme", "cell-a", -1),
        lambda store: publish_tenant_route(store, ARN, "acme", "cell-a", True),
        lambda store: publish_cell_origin(store, ARN, "cell-a", "tokens.example.com", "v1"),
        lambda store: publish_cell_origin(store, ARN, "cell-a", DOMAIN + ".example.com", "v1"),
        lambda store: publish_cell_origin(store, ARN, "cell-a", DOMAIN, "v1/../admin"),
        lambda store: publish_cell_origin(store, ARN, "../cell", DOMAIN, "v1"),
        # A trailing newline: Python's "$" matches before it, the router's (JavaScript's) does not.
        lambda store: publish_tenant_route(store, ARN, "acme\n", "cell-a", 1),
        lambda store: publish_tenant_route(store, ARN, "acme", "cell-a\n", 1),
        lambda store: publish_cell_origin(store, ARN, "cell-a\n", DOMAIN, "v1"),
        lambda store: publish_cell_origin(store, ARN, "cell-a", DOMAIN + "\n", "v1"),
        lambda store: publish_cell_origin(store, ARN, "cell-a", DOMAIN, "v1\n"),
    ],
)
def test_nothing_the_router_would_refuse_is_written(write: Callable[[FakeStore], bool]) -> None:
    store = FakeStore()
    with pytest.raises(ValueError, match="not a"):
        write(store)
    assert store.writes == []


def test_what_is_written_is_what_the_router_reads() -> None:
    """The store made here, read by router/edge_router.js: each tenant to its cell's origin."""
    store = FakeStore()
    publish_cell_origin(store, ARN, "cell-a", DOMAIN, "v1")
    publish_cell_origin(store, ARN, "cell-b", "f6g7h8i9j0.execute-api.us-east-2.amazonaws.com", "prod")
    publish_tenant_route(store, ARN, "1", "cell-a", 1)
    publish_tenant_route(store, ARN, "10", "cell-b", 2)
    one, ten = run_router(
        [Case("1", bearer("1"), [], [], store=store.items), Case("10", bearer("10"), [], [], store=store.items)]
    )
    assert one["origin_updates"] == to({"domain": DOMAIN, "path": "/v1"})
    assert ten["origin_updates"] == to({"domain": "f6g7h8i9j0.execute-api.us-east-2.amazonaws.com", "path": "/prod"})
