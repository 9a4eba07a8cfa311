from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support_tickets import keys
from support_tickets.keys import InvalidTenantId, TicketStatus

VALID_TENANTS = st.from_regex(r"\A[a-z0-9-]{1,63}\Z")


@pytest.mark.parametrize("tenant_id", ["1", "10", "a", "a-b", "acme-corp", "x" * 63])
def test_valid_tenant_ids_are_accepted(tenant_id: str) -> None:
    assert keys.validate_tenant_id(tenant_id) == tenant_id


@pytest.mark.parametrize(
    "tenant_id", ["", "A", "a|b", "a*", "a#b", "a b", "x" * 64, "1|", "*", "?", "ä", None, 10, "a\n"]
)
def test_invalid_tenant_ids_are_refused(tenant_id: object) -> None:
    with pytest.raises(InvalidTenantId):
        keys.validate_tenant_id(tenant_id)


def test_tenant_1_prefix_does_not_prefix_tenant_10_keys() -> None:
    assert not keys.ticket_pk("10", "X").startswith(keys.tenant_prefix("1"))
    assert not keys.tenant_status("10", "OPEN").startswith(keys.tenant_prefix("1"))


@given(VALID_TENANTS, VALID_TENANTS)
def test_no_tenant_prefix_is_a_prefix_of_another_tenants_keys(a: str, b: str) -> None:
    for key in (keys.ticket_pk(b, "T1"), keys.tenant_status(b, "OPEN"), keys.aggregate_pk(b), keys.idempotency_pk(b)):
        assert key.startswith(keys.tenant_prefix(a)) == (a == b)
        assert keys.tenant_of_key(key) == b


def test_every_key_has_the_tenant_prefix() -> None:
    prefix = "TENANT#acme|"
    assert keys.ticket_pk("acme", "01J") == prefix + "TICKET#01J"
    assert keys.tenant_status("acme", TicketStatus.IN_PROGRESS) == prefix + "IN_PROGRESS"
    assert keys.aggregate_pk("acme") == prefix + "AGGREGATE"
    assert keys.idempotency_pk("acme") == prefix + "IDEMPOTENCY"


def test_status_round_trips_through_tenant_status() -> None:
    for status in TicketStatus:
        assert keys.status_from_tenant_status(keys.tenant_status("a-b", status)) is status


def test_unassigned_resolver_round_trips_and_cannot_be_a_user_name() -> None:
    assert keys.resolver_from_key(keys.resolver_key(None)) is None
    assert keys.resolver_from_key(keys.resolver_key("johnd")) == "johnd"
    import re

    assert not re.fullmatch(keys.RESOLVER_PATTERN, keys.UNASSIGNED_RESOLVER)


@pytest.mark.parametrize("ticket_id", ["", "a|b", "a#b", "a*", "../x", "a%2F", "x" * 65])
def test_ticket_keys_refuse_ids_that_could_escape_the_key_layout(ticket_id: str) -> None:
    with pytest.raises(ValueError, match="invalid ticket id"):
        keys.ticket_pk("acme", ticket_id)
