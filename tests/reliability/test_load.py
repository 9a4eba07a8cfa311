"""A bounded, seeded load run against the local stack: 20 concurrent clients,
mixed requests over 3 tenants (two of them a "1"/"10" prefix pair). Asserted:
no 5xx; no cross-tenant read (every ticket any answer shows was created by the
caller's tenant, by one of its users; another tenant's id is always 404); and,
once the stream has drained, every tenant's aggregates equal both a recount
from scratch (ops.reconcile.recount on GSI1) and what the clients know they
created and deleted. Throughput and latency are measured and printed in the
run's summary, never asserted.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from ops.reconcile import recount
from support_tickets.core.keys import TicketStatus
from tests.depth import sized
from tests.e2e.conftest import Response, RunningStack, new_tenant_id
from tests.reliability.conftest import report

SEED = 20261121
CLIENTS = 20
REQUESTS_PER_CLIENT = sized(deep=15, ci=5)  # 300 requests in all, 100 in make test
STATUSES = [status.value for status in TicketStatus]


@dataclass
class Tenant:
    tenant_id: str
    users: dict[str, str]  # username → token
    admin: tuple[str, str]  # username, token
    created: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)


@dataclass
class Ledger:
    """What the clients know, and every answer they got."""

    tenants: list[Tenant]
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def ids_of(self, tenant: Tenant) -> list[str]:
        with self.lock:
            return sorted(tenant.created - tenant.deleted)


def shows_only_own_tickets(tenant: Tenant, tickets: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the tickets an answer showed to ``tenant``."""
    return [
        f"{tenant.tenant_id} was shown {ticket.get('ticket_id')} by {ticket.get('created_by')}"
        for ticket in tickets
        if ticket.get("ticket_id") not in tenant.created or ticket.get("created_by") not in tenant.users
    ]


class Client:
    """One of the concurrent clients: a member of one tenant, seeded."""

    def __init__(self, stack: RunningStack, ledger: Ledger, number: int) -> None:
        self.stack, self.ledger, self.number = stack, ledger, number
        self.rng = random.Random(SEED + number)
        self.tenant = ledger.tenants[number % len(ledger.tenants)]
        self.others = [other for other in ledger.tenants if other is not self.tenant]
        self.username = sorted(self.tenant.users)[number % len(self.tenant.users)]

    def run(self) -> None:
        actions = [
            (0.25, self.create),
            (0.20, self.list_by_status),
            (0.15, self.read),
            (0.15, self.update),
            (0.08, self.comment),
            (0.05, self.batch),
            (0.03, self.delete),
            (0.03, self.aggregates),
            (0.06, self.cross_tenant),
        ]
        for _ in range(REQUESTS_PER_CLIENT):
            own = self.ledger.ids_of(self.tenant)
            action = self.create if not own else self.rng.choices([a for _, a in actions], [w for w, _ in actions])[0]
            action(own)

    # ------------------------------------------------------------ plumbing
    def call(self, name: str, method: str, path: str, *, admin: bool = False, body: Any = None) -> Response:
        token = self.tenant.admin[1] if admin else self.tenant.users[self.username]
        started = time.perf_counter()
        response = self.stack.request(method, path, token=token, body=body)
        elapsed = time.perf_counter() - started
        with self.ledger.lock:
            self.ledger.latencies[name].append(elapsed)
            self.ledger.statuses[(name, response.status)] += 1
            if response.status >= 500:
                self.ledger.violations.append(f"{name} {method} {path}: {response.status} {response.body}")
        return response

    def check_shown(self, tickets: list[dict[str, Any]]) -> None:
        problems = shows_only_own_tickets(self.tenant, tickets)
        with self.ledger.lock:
            self.ledger.violations.extend(problems)

    # ------------------------------------------------------------ the mix
    def create(self, own: list[str]) -> None:
        response = self.call(
            "create", "POST", "/tickets", body={"title": f"load {self.number}", "resolver": self.username}
        )
        if response.status == 201:
            with self.ledger.lock:
                self.tenant.created.add(response.body["ticket_id"])

    def list_by_status(self, own: list[str]) -> None:
        query = f"?status={self.rng.choice(STATUSES)}&limit=100"
        if self.rng.random() < 0.5:
            query += f"&resolver={self.username}"
        response = self.call("list", "GET", "/tickets" + query)
        if response.status == 200:
            self.check_shown(response.body["items"])

    def read(self, own: list[str]) -> None:
        if self.rng.random() < 0.5:
            response = self.call("get", "GET", f"/tickets/{self.rng.choice(own)}")
            shown = [response.body["ticket"]] if response.status == 200 else []
        else:
            response = self.call("summary", "GET", f"/tickets/{self.rng.choice(own)}/summary")
            shown = [response.body] if response.status == 200 else []
        self.check_shown(shown)

    def update(self, own: list[str]) -> None:
        self.call("update", "PATCH", f"/tickets/{self.rng.choice(own)}", body={"status": self.rng.choice(STATUSES)})

    def comment(self, own: list[str]) -> None:
        self.call("comment", "POST", f"/tickets/{self.rng.choice(own)}/comments", body={"body": "load"})

    def batch(self, own: list[str]) -> None:
        body = {"ticket_ids": self.rng.sample(own, min(len(own), 5)), "status": self.rng.choice(STATUSES)}
        self.call("batch", "POST", "/tickets/status", body=body)

    def delete(self, own: list[str]) -> None:
        victim = self.rng.choice(own)
        if self.call("delete", "DELETE", f"/tickets/{victim}", admin=True).status == 204:
            with self.ledger.lock:
                self.tenant.deleted.add(victim)

    def aggregates(self, own: list[str]) -> None:
        self.call("aggregates", "GET", "/aggregates", admin=True)

    def cross_tenant(self, own: list[str]) -> None:
        """Another tenant's ticket, by id: never found, whoever asks."""
        foreign = [ticket for other in self.others for ticket in self.ledger.ids_of(other)]
        if foreign:
            response = self.call("cross-tenant", "GET", f"/tickets/{self.rng.choice(foreign)}/summary")
            if response.status != 404:
                with self.ledger.lock:
                    self.ledger.violations.append(f"cross-tenant read answered {response.status}: {response.body}")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


@pytest.fixture
def ledger(stack: RunningStack) -> Ledger:
    base = new_tenant_id()
    tenants = []
    for tenant_id in (base, base + "0", new_tenant_id()):
        users = {f"{name}-{tenant_id}": stack.token(tenant_id, f"{name}-{tenant_id}") for name in ("ann", "ben")}
        admin = f"root-{tenant_id}"
        tenants.append(Tenant(tenant_id, users, (admin, stack.token(tenant_id, admin, admin=True))))
    return Ledger(tenants)


def test_concurrent_mixed_load_loses_nothing_and_leaks_nothing(stack: RunningStack, ledger: Ledger) -> None:
    # When 20 clients send their mixed requests at once
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        for future in [pool.submit(Client(stack, ledger, number).run) for number in range(CLIENTS)]:
            future.result()
    elapsed = time.perf_counter() - started
    every = [latency for latencies in ledger.latencies.values() for latency in latencies]
    report(
        f"load: {len(every)} requests from {CLIENTS} clients in {elapsed:.1f} s = {len(every) / elapsed:.0f} req/s; "
        f"latency p50 {sorted(every)[len(every) // 2] * 1000:.0f} ms, p95 {p95(every) * 1000:.0f} ms"
    )
    report(
        "load p95 by route: "
        + ", ".join(f"{name} {p95(v) * 1000:.0f} ms" for name, v in sorted(ledger.latencies.items()))
    )
    report(f"load statuses: {dict(sorted(ledger.statuses.items()))}")

    # Then no 5xx and no answer showed another tenant's ticket
    assert ledger.violations == []
    assert all(status < 500 for _, status in ledger.statuses)
    assert {name for name, _ in ledger.statuses} >= {"create", "list", "update", "batch", "delete", "cross-tenant"}

    # And once the stream has drained, every tenant's counts are exact
    assert stack.drain()["drained"]
    dynamodb, table = stack.operator("dynamodb"), stack.state["table_name"]
    for tenant in ledger.tenants:
        response = stack.request("GET", "/aggregates", token=tenant.admin[1])
        assert response.status == 200
        truth = {status: recount(dynamodb, table, tenant.tenant_id, TicketStatus(status)) for status in STATUSES}
        assert response.body["counts"] == truth, tenant.tenant_id
        assert response.body["total"] == len(tenant.created - tenant.deleted) > 0, tenant.tenant_id
