"""The list cursor (``support_tickets.data.listing``): every cursor the
encoder can emit is one the decoder accepts, and one API Gateway carries.

The worst states come from the limits: 64 shards (ordinal 64), 128-character
resolvers, 64-character ticket ids, named own keys of 128 printable
characters that JSON escapes (``"``), the largest skip count."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor
from support_tickets.data import listing
from support_tickets.data.cursor import query_fingerprint

RESOLVER_CHARS = "-._@" + string.digits + string.ascii_letters
FINGERPRINT = query_fingerprint("1", "list", "OPEN", "")
# API Gateway's shortest URL limit (edge-optimized and private REST APIs; regional: 10,240).
URL_LIMIT = 8192

resolvers = st.one_of(
    st.just(keys.UNASSIGNED_RESOLVER), st.text(RESOLVER_CHARS, min_size=1, max_size=listing.MAX_RESOLVER_CHARS)
)
worst_resolvers = st.text(RESOLVER_CHARS, min_size=128, max_size=128)
ticket_ids = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=64)
named_parts = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=listing.MAX_NAMED_KEY_CHARS)
skips = st.integers(0, listing.MAX_SKIP)


@st.composite
def boundaries(draw: st.DrawFn, resolver: st.SearchStrategy[str] = resolvers) -> listing.Boundary:
    at = draw(resolver)
    if draw(st.booleans()):
        return listing.Boundary(at)  # before every partition, at a resolver
    anchor = draw(st.sampled_from(["ticket", "key", "past", "at", "start"]))
    anchor_resolver = min(at, draw(resolver))
    position = {
        "ticket": lambda: listing.Position.of_ticket(draw(ticket_ids), anchor_resolver),
        "key": lambda: listing.Position(anchor_resolver, draw(named_parts), draw(named_parts.filter(bool))),
        "past": lambda: listing.Position.past(anchor_resolver),
        "at": lambda: listing.Position.at(anchor_resolver),
        "start": lambda: listing.START,
    }[anchor]()
    position = listing.Position(position.resolver, position.suffix, position.sk, position.kind, draw(skips))
    return listing.Boundary(at, draw(st.integers(0, listing.MAX_ORDINAL)), position)


@settings(max_examples=300, deadline=None)
@given(boundaries())
def test_every_boundary_round_trips(boundary: listing.Boundary) -> None:
    cursor = listing.encode_cursor(FINGERPRINT, boundary)
    assert len(cursor) <= listing.MAX_CURSOR_LENGTH
    assert listing.decode_cursor(cursor, FINGERPRINT, None) == boundary


@settings(max_examples=200, deadline=None)
@given(boundaries(worst_resolvers))
def test_the_longest_states_round_trip(boundary: listing.Boundary) -> None:
    cursor = listing.encode_cursor(FINGERPRINT, boundary)
    assert len(cursor) <= listing.MAX_CURSOR_LENGTH
    assert listing.decode_cursor(cursor, FINGERPRINT, None) == boundary


def test_the_worst_state_the_limits_allow_fits_the_bound_and_a_url() -> None:
    # Incompressible: every field at its longest, the named key parts all escaped quotes.
    resolver = "".join(RESOLVER_CHARS[(n * 7) % len(RESOLVER_CHARS)] for n in range(128))
    position = listing.Position(resolver, '"' * 128, '"' * 128, skip=listing.MAX_SKIP)
    boundary = listing.Boundary(resolver, listing.MAX_ORDINAL, position)
    cursor = listing.encode_cursor(FINGERPRINT, boundary)
    assert len(cursor) <= listing.MAX_CURSOR_LENGTH
    assert listing.decode_cursor(cursor, FINGERPRINT, None) == boundary
    # The longest request line of GET /tickets: stage, every parameter at its longest.
    url = f"/v1/tickets?status=IN_PROGRESS&resolver={'r' * 128}&limit=100&cursor={'c' * listing.MAX_CURSOR_LENGTH}"
    assert len(url) < URL_LIMIT
    assert listing.MAX_CURSOR_LENGTH == 1148  # as documented in listing's docstring


def test_a_cursor_of_64_shards_and_the_longest_resolvers_is_accepted() -> None:
    # What the per-partition cursor emitted (10,243 characters) and refused (over 8,192).
    resolver = "Z" * 128
    for ordinal in range(listing.MAX_ORDINAL + 1):
        boundary = listing.Boundary(resolver, ordinal, listing.Position.of_ticket("T" * 64, resolver))
        cursor = listing.encode_cursor(FINGERPRINT, boundary)
        assert listing.decode_cursor(cursor, FINGERPRINT, None) == boundary


@pytest.mark.parametrize(
    "payload",
    [
        {"q": FINGERPRINT, "r": "ada", "o": 65, "p": ["k", "ada", "TICKET#1", "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": 0, "p": ["k", "ada", "x" * 129, "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": 0, "p": ["k", "ada", "TICKET#1", "", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": 0, "p": ["k", "bob", "TICKET#1", "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "a\u00e9", "o": -1},
        {"q": FINGERPRINT, "r": "", "o": 0, "p": ["a", "", "", "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": 0, "p": ["k", "ada", "TICKET#1", "SUMMARY", -1]},
        {"q": FINGERPRINT, "r": "ada", "o": 0, "p": ["k", "ada", "\u00e9", "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": True, "p": ["k", "ada", "TICKET#1", "SUMMARY", 0]},
        {"q": FINGERPRINT, "r": "ada", "o": -1, "p": ["k", "ada", "TICKET#1", "SUMMARY", 0]},
    ],
)
def test_a_forged_state_is_invalid(payload: dict[str, object]) -> None:
    import base64
    import json
    import zlib

    cursor = base64.urlsafe_b64encode(zlib.compress(json.dumps(payload).encode())).decode().rstrip("=")
    with pytest.raises(InvalidCursor):
        listing.decode_cursor(cursor, FINGERPRINT, None)


# ---------------------------------------------------------------- next_resolver
def brute_next(value: str, alphabet: str, longest: int) -> str | None:
    """The smallest string over ``alphabet`` of 1..``longest`` characters, or "#UNASSIGNED", above ``value``."""
    found: list[str] = [keys.UNASSIGNED_RESOLVER] if value < keys.UNASSIGNED_RESOLVER else []
    level = [""]
    for _ in range(longest):
        level = [prefix + c for prefix in level for c in alphabet]
        found.extend(word for word in level if word > value)
    return min(found) if found else None


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=0x7F), max_size=140))
def test_next_resolver_is_a_resolver_key_above_the_value_with_none_between(value: str) -> None:
    following = listing.next_resolver(value)
    if following is None:
        assert value >= "z" * 128
        return
    assert listing.is_resolver_key(following)
    assert following > value


@settings(max_examples=300, deadline=None)
@given(st.text("#,-.09@AZ_az{\x00\x7f", max_size=4))
def test_next_resolver_is_the_smallest_one(value: str) -> None:
    # Over a reduced alphabet and length, against every candidate (the same rule at 128).
    alphabet = "".join(sorted("-.09@AZ_az"))
    import support_tickets.data.listing as module

    saved = (module._RESOLVER_ALPHABET, module.MAX_RESOLVER_CHARS)
    module._RESOLVER_ALPHABET, module.MAX_RESOLVER_CHARS = alphabet, 3  # type: ignore[misc]
    try:
        assert module.next_resolver(value) == brute_next(value, alphabet, 3)
    finally:
        module._RESOLVER_ALPHABET, module.MAX_RESOLVER_CHARS = saved  # type: ignore[misc]
