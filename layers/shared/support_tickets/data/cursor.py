"""Opaque pagination cursors, bound to the caller's tenant and to the query.

A cursor is base64url JSON of ``{"q": <query fingerprint>, "k": <start key>}``.
On the way back in it must decode, carry the fingerprint of *this* tenant and
*this* query (so a cursor from tenant ``1`` is rejected for tenant ``10``, and a
cursor of the OPEN list is rejected for the CLOSED list), and its start key must
have exactly the attributes and values the query allows: the start key can only
point inside the caller's own partition. There is no secret involved on purpose:
the checks make a forged cursor useless rather than hard to forge, and the
tenant-scoped IAM role would refuse a foreign start key anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping

from support_tickets.core.errors import InvalidCursor

# Above the longest cursor any read emits: the audit trail's, 8 partitions' positions at
# the longest audit sort keys (128-character event ids) is 2,300 characters
# (tests/unit/test_cursor.py); far inside API Gateway's 8,192-character URLs.
MAX_CURSOR_LENGTH = 3072
KeyCheck = Callable[[Mapping[str, str]], bool]


def query_fingerprint(tenant_id: str, *parts: str) -> str:
    material = "\x1f".join((tenant_id, *parts)).encode()
    return hashlib.sha256(material).hexdigest()[:24]


def encode_cursor(fingerprint: str, start_key: Mapping[str, str]) -> str:
    raw = json.dumps({"q": fingerprint, "k": dict(start_key)}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str, allowed_attributes: frozenset[str], check: KeyCheck) -> dict[str, str]:
    """The start key in ``cursor``, or :class:`InvalidCursor`."""
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise InvalidCursor()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidCursor() from exc
    if not isinstance(payload, dict) or set(payload) != {"q", "k"} or payload["q"] != fingerprint:
        raise InvalidCursor()
    start_key = payload["k"]
    if (
        not isinstance(start_key, dict)
        or set(start_key) != allowed_attributes
        or not all(isinstance(value, str) for value in start_key.values())
        or not check(start_key)
    ):
        raise InvalidCursor()
    return start_key
