"""ID token verification (support_tickets.auth.jwks: PyJWT), against tokens
signed by joserfc (what the local user pool signs with) and tampered ones."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import RSAKey

from local_stack.cognito.user_pool import public_jwks
from support_tickets.auth import jwks as jwks_module
from support_tickets.auth.jwks import InvalidToken, Jwks, signing_key
from tests.depth import sized

KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE"
AUDIENCE = "app-client"
PAYLOAD = {
    "sub": "s",
    "custom:tenant_id": "acme",
    "iss": ISSUER,
    "aud": AUDIENCE,
    "iat": 1_700_000_000,
    "exp": 2_000_000_000,
}


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
    """``time.monotonic``, moved by hand: PyJWT's key-set cache and refetch
    cooldown read it in several of its modules."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(time, "monotonic", lambda: self.now)


def jwks(*documents: dict[str, Any]) -> tuple[Jwks, Fetches]:
    fetch = Fetches(*(documents or (public_jwks(KEY),)))
    return Jwks("https://issuer/.well-known/jwks.json", fetch=fetch), fetch


def verify(verifier: Jwks, token: str, issuer: str = ISSUER, audience: str = AUDIENCE) -> dict[str, Any]:
    return verifier.verify(token, issuer=issuer, audience=[audience])


def test_a_token_signed_by_the_pools_key_verifies() -> None:
    verifier, _ = jwks()
    assert verify(verifier, sign()) == PAYLOAD


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
        pytest.param(sign({**PAYLOAD, "iss": ISSUER + "x"}), id="another-issuer"),
        pytest.param(sign({**PAYLOAD, "aud": "another-client"}), id="another-audience"),
        pytest.param(sign({**PAYLOAD, "exp": 1_700_000_100}), id="expired"),
        *(
            pytest.param(sign({name: value for name, value in PAYLOAD.items() if name != claim}), id=f"no-{claim}")
            for claim in ("exp", "iat", "iss", "aud", "sub")
        ),
    ],
)
def test_anything_else_is_refused(token: str) -> None:
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verify(verifier, token)


def test_a_changed_payload_breaks_the_signature() -> None:
    header, _, signature = sign().split(".")
    forged = f"{header}.{part({**PAYLOAD, 'custom:tenant_id': 'globex'})}.{signature}"
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verify(verifier, forged)


@settings(max_examples=sized(deep=60, ci=20), deadline=None)
@given(position=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_bit_of_the_signature_is_refused(position: int, bit: int) -> None:
    token = sign()
    head, _, signature = token.rpartition(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[position % len(raw)] ^= 1 << bit
    tampered = f"{head}.{base64.urlsafe_b64encode(bytes(raw)).decode().rstrip('=')}"
    verifier, _ = jwks()
    with pytest.raises(InvalidToken):
        verify(verifier, tampered)


def test_weak_or_foreign_keys_are_never_loaded() -> None:
    small = RSAKey.generate_key(1024, parameters={"kid": "small"})
    with pytest.raises(InvalidToken):
        signing_key(public_jwks(small)["keys"][0])
    with pytest.raises(InvalidToken):
        signing_key({**public_jwks(KEY)["keys"][0], "kty": "EC"})
    with pytest.raises(InvalidToken):
        signing_key({**public_jwks(KEY)["keys"][0], "alg": "RS512"})
    with pytest.raises(InvalidToken):
        signing_key({**public_jwks(KEY)["keys"][0], "use": "enc"})
    # A JWKS whose only key is too small verifies nothing signed with it, nor does
    # a set whose small key sits next to a good one.
    verifier, _ = jwks(public_jwks(small))
    with pytest.raises(InvalidToken):
        verify(verifier, sign(key=small))
    verifier, _ = jwks({"keys": [*public_jwks(KEY)["keys"], *public_jwks(small)["keys"]]})
    assert verify(verifier, sign()) == PAYLOAD
    with pytest.raises(InvalidToken):
        verify(verifier, sign(key=small))


def test_the_key_set_is_fetched_once_within_its_lifespan(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    verifier, fetches = jwks()
    for _ in range(5):
        verify(verifier, sign())
        clock.now += 100
    assert fetches.urls == ["https://issuer/.well-known/jwks.json"]
    assert verifier.fetches == 1


def test_a_key_the_pool_withdraws_stops_verifying_after_the_lifespan(monkeypatch: pytest.MonkeyPatch) -> None:
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "alg": "RS256", "use": "sig"})
    clock = Clock(monkeypatch)
    verifier, fetches = jwks(public_jwks(KEY), public_jwks(rotated))
    verify(verifier, sign())
    clock.now += jwks_module.KEY_SET_LIFESPAN_SECONDS - 1
    verify(verifier, sign())  # still the cached set
    clock.now += 2
    with pytest.raises(InvalidToken):
        verify(verifier, sign())  # k1 is gone from the refetched set
    assert len(fetches.urls) == 2
    assert verify(verifier, sign(key=rotated)) == PAYLOAD


def test_an_unknown_kid_refetches_once_then_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "alg": "RS256", "use": "sig"})
    clock = Clock(monkeypatch)
    verifier, fetches = jwks(public_jwks(KEY), {"keys": [*public_jwks(KEY)["keys"], *public_jwks(rotated)["keys"]]})
    verify(verifier, sign())  # first fetch
    # Right after a fetch, an unknown kid costs nothing: no fetch per made-up kid.
    with pytest.raises(InvalidToken):
        verify(verifier, sign(key=rotated))
    assert len(fetches.urls) == 1
    clock.now += 61
    assert verify(verifier, sign(key=rotated)) == PAYLOAD  # one refetch finds the rotated key
    assert len(fetches.urls) == 2
    for _ in range(3):
        with pytest.raises(InvalidToken):
            verify(verifier, sign(header={"alg": "RS256", "kid": "made-up"}))
    assert len(fetches.urls) == 2  # within the interval: no more fetches


def test_a_key_set_outage_is_an_error_not_a_refused_token() -> None:
    def unreachable(url: str) -> dict[str, Any]:
        raise OSError("connection refused")

    verifier = Jwks("https://issuer/.well-known/jwks.json", fetch=unreachable)
    with pytest.raises(OSError, match="connection refused"):
        verify(verifier, sign())
