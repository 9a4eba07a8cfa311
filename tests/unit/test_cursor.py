from __future__ import annotations

import base64
import json

import pytest

from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor
from support_tickets.data.cursor import MAX_CURSOR_LENGTH, decode_cursor, encode_cursor, query_fingerprint

ATTRS = frozenset({"pk", "sk"})
KEY = {"pk": "TENANT#a|TICKET#1", "sk": "COMMENT#x"}


def ok(key: object) -> bool:
    return True


def test_round_trip() -> None:
    fingerprint = query_fingerprint("a", "comments", "1")
    assert decode_cursor(encode_cursor(fingerprint, KEY), fingerprint, ATTRS, ok) == KEY


def test_cursor_of_tenant_1_is_invalid_for_tenant_10() -> None:
    cursor = encode_cursor(query_fingerprint("1", "list", "OPEN", ""), KEY)
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, query_fingerprint("10", "list", "OPEN", ""), ATTRS, ok)


def test_cursor_of_another_query_is_invalid() -> None:
    cursor = encode_cursor(query_fingerprint("a", "list", "OPEN", ""), KEY)
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, query_fingerprint("a", "list", "CLOSED", ""), ATTRS, ok)


def forge(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        "bm90IGpzb24",
        forge([1, 2]),
        forge({"q": "x"}),
        forge({"q": query_fingerprint("a", "q"), "k": {"pk": "x"}}),
        forge({"q": query_fingerprint("a", "q"), "k": {"pk": 1, "sk": "s"}}),
        forge({"q": query_fingerprint("a", "q"), "k": KEY, "extra": 1}),
        "A" * 5000,
    ],
)
def test_forged_or_truncated_cursors_are_invalid(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, query_fingerprint("a", "q"), ATTRS, ok)


def test_key_check_is_applied() -> None:
    fingerprint = query_fingerprint("a", "q")
    with pytest.raises(InvalidCursor):
        decode_cursor(encode_cursor(fingerprint, KEY), fingerprint, ATTRS, lambda key: False)


def test_truncated_cursor_is_invalid() -> None:
    fingerprint = query_fingerprint("a", "q")
    cursor = encode_cursor(fingerprint, KEY)
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor[:-6], fingerprint, ATTRS, ok)


def test_the_longest_audit_trail_cursor_is_accepted() -> None:
    # Every partition of the day at the longest sort key the audit pattern allows.
    longest = keys.audit_sk("2026-11-21T10:00:00.000Z", "9" * keys.SEQUENCE_DIGITS, "e" * 128)
    state = {"d": "2026-11-21", "f": "2026-11-01T00:00:00.000Z", "t": "2026-12-01T23:59:59.999Z"}
    state.update({str(shard): longest for shard in range(keys.AUDIT_SHARDS)})
    fingerprint = query_fingerprint("1", "audit", "", "")
    cursor = encode_cursor(fingerprint, state)
    assert len(cursor) <= MAX_CURSOR_LENGTH
    assert decode_cursor(cursor, fingerprint, frozenset(state), lambda _: True) == state
