"""RS256 verification with the standard library (support_tickets.auth.jwks), against
tokens signed by joserfc (what the local user pool signs with) and tampered ones."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import RSAKey

from local_stack.cognito import public_jwks
from support_tickets.auth.jwks import InvalidToken, Jwks, RsaPublicKey, b64url_decode, split_token
from tests.depth import sized

KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
PAYLOAD = {"sub": "s", "custom:tenant_id": "acme", "exp": 2_000_000_000}


def sign(payload: dict[str, Any] = PAYLOAD, key: RSAKey = KEY, header: dict[str, Any] | None = None) -> str:
    return jwt.encode(header or {"alg": "RS256", "kid": key.kid}, payload, key)


def part(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


class Fetches:
    def __init__(self, *documents: dict[str, Any]) -> None:
        self.documents = list(documents)
        self.urls: list[str] = []

    def __call__(self, url: str) -> dict[str, Any]:
        self.urls.append(url)
        return self.documents[min(len(self.urls), len(self.documents)) - 1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def jwks(*documents: dict[str, Any], clock: Clock | None = None) -> tuple[Jwks, Fetches]:
    fetch = Fetches(*(documents or (public_jwks(KEY),)))
    return Jwks("https://issuer/.well-known/jwks.json", fetch=fetch, clock=clock or Clock()), fetch


def test_a_token_signed_by_the_pools_key_verifies() -> None:
    verifier, _ = jwks()
    assert verifier.verify(sign()) == PAYLOAD


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(sign(key=OTHER_KEY), id="another-key-same-kid"),
        pytest.param(sign().rsplit(".", 1)[0] + ".", id="no-signature"),
        pytest.param(sign().rsplit(".", 1)[0] + "." + sign(key=OTHER_KEY).rsplit(".", 1)[1], id="foreign-signature"),
        pytest.param(part({"alg": "none", "kid": "k1"}) + "." + part(PAYLOAD) + ".", id="alg-none"),
        pytest.param(part({"alg": "HS256", "kid": "k1"}) + "." + part(PAYLOAD) + ".c2ln", id="alg-hs256"),
        pytest.param(part({"alg": "RS256"}) + "." + part(PAYLOAD) + ".c2ln", id="no-kid"),
        pytest.param(sign(header={"alg": "RS256", "kid": "k1", "crit": ["b64"], "b64": True}), id="crit-header"),
        pytest.param("a.b", id="two-parts"),
        pytest.param("a.b.c.d", id="four-parts"),
        pytest.param("", id="empty"),
        pytest.param("x" * 20_000, id="huge"),
        pytest.param(part({"alg": "RS256", "kid": "k1"}) + ".!!!." + "c2ln", id="not-base64url"),
        pytest.param(part({"alg": "RS256", "kid": "k1"}) + "." + part({"a": 1}) + "=.c2ln", id="padded"),
        pytest.param("W10." + part(PAYLOAD) + ".c2ln", id="header-not-an-object"),
    ],
)
def test_anything_else_is_refused(token: str) -> None:
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verifier.verify(token)


def test_a_changed_payload_breaks_the_signature() -> None:
    header, _, signature = sign().split(".")
    forged = f"{header}.{part({**PAYLOAD, 'custom:tenant_id': 'globex'})}.{signature}"
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verifier.verify(forged)


@settings(max_examples=sized(deep=60, ci=20), deadline=None)
@given(position=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_bit_of_the_signature_is_refused(position: int, bit: int) -> None:
    token = sign()
    head, _, signature = token.rpartition(".")
    raw = bytearray(b64url_decode(signature))
    raw[position % len(raw)] ^= 1 << bit
    tampered = f"{head}.{base64.urlsafe_b64encode(bytes(raw)).decode().rstrip('=')}"
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verifier.verify(tampered)


def test_weak_or_foreign_keys_are_never_loaded() -> None:
    small = RSAKey.generate_key(1024, parameters={"kid": "small"})
    with pytest.raises(InvalidToken):
        RsaPublicKey.from_jwk(public_jwks(small)["keys"][0])
    with pytest.raises(InvalidToken):
        RsaPublicKey.from_jwk({**public_jwks(KEY)["keys"][0], "kty": "EC"})
    with pytest.raises(InvalidToken):
        RsaPublicKey.from_jwk({**public_jwks(KEY)["keys"][0], "alg": "RS512"})
    # A JWKS whose only key is too small verifies nothing signed with it.
    verifier, _ = jwks(public_jwks(small))
    with pytest.raises(InvalidToken):
        verifier.verify(sign(key=small))


def test_the_key_set_is_fetched_once_per_container() -> None:
    verifier, fetches = jwks()
    for _ in range(5):
        verifier.verify(sign())
    assert fetches.urls == ["https://issuer/.well-known/jwks.json"]


def test_an_unknown_kid_refetches_once_then_waits() -> None:
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "alg": "RS256", "use": "sig"})
    clock = Clock()
    verifier, fetches = jwks(
        public_jwks(KEY), {"keys": [*public_jwks(KEY)["keys"], *public_jwks(rotated)["keys"]]}, clock=clock
    )
    verifier.verify(sign())  # first fetch
    # Right after a fetch, an unknown kid costs nothing: no fetch per made-up kid.
    with pytest.raises(InvalidToken):
        verifier.verify(sign(key=rotated))
    assert len(fetches.urls) == 1
    clock.now += 61
    assert verifier.verify(sign(key=rotated)) == PAYLOAD  # one refetch finds the rotated key
    assert len(fetches.urls) == 2
    for _ in range(3):
        with pytest.raises(InvalidToken):
            verifier.verify(sign(header={"alg": "RS256", "kid": "made-up"}))
    assert len(fetches.urls) == 2  # within the interval: no more fetches


def test_split_token_decodes_without_verifying() -> None:
    header, payload, signing_input, signature = split_token(sign())
    assert (header["kid"], payload, signing_input.count(b"."), len(signature)) == ("k1", PAYLOAD, 1, 256)
