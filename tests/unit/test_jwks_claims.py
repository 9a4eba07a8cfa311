"""The claim checks of support_tickets.auth.jwks that test_jwks.py does not
reach through a signed token (``nbf``, ``iat`` in the future, ``jti``, an
audience list), and a key set's private or malformed keys, which are dropped."""

from __future__ import annotations

from typing import Any

import pytest
from joserfc.jwk import RSAKey

from local_stack.cognito.user_pool import public_jwks
from support_tickets.auth.jwks import InvalidToken, check_claims, signing_key

NOW = 1_800_000_000.0
CLAIMS = {"sub": "s", "iss": "I", "aud": "A", "iat": int(NOW) - 10, "exp": int(NOW) + 100}


def check(**changes: Any) -> None:
    claims = {name: value for name, value in {**CLAIMS, **changes}.items() if value is not None}
    check_claims(claims, issuer="I", audience=["A"], now=NOW)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({}, id="plain"),
        pytest.param({"nbf": int(NOW) - 1}, id="nbf-past"),
        pytest.param({"nbf": int(NOW)}, id="nbf-now"),
        pytest.param({"aud": ["B", "A"]}, id="aud-list-naming-an-allowed-one"),
        pytest.param({"jti": "j"}, id="jti-string"),
        pytest.param({"iat": int(NOW)}, id="iat-now"),
    ],
)
def test_claims_that_pass(changes: dict[str, Any]) -> None:
    check(**changes)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"nbf": int(NOW) + 1}, id="nbf-future"),
        pytest.param({"nbf": "soon"}, id="nbf-not-a-number"),
        pytest.param({"iat": int(NOW) + 1}, id="iat-future"),
        pytest.param({"iat": "x"}, id="iat-not-a-number"),
        pytest.param({"exp": int(NOW)}, id="exp-now"),
        pytest.param({"exp": [1]}, id="exp-a-list"),
        pytest.param({"aud": ["B"]}, id="aud-list-of-others"),
        pytest.param({"aud": ["A", 1]}, id="aud-list-not-all-strings"),
        pytest.param({"aud": {"A": 1}}, id="aud-an-object"),
        pytest.param({"iss": ["I"]}, id="iss-a-list"),
        pytest.param({"sub": 1}, id="sub-a-number"),
        pytest.param({"jti": 1}, id="jti-a-number"),
        *(pytest.param({claim: None}, id=f"no-{claim}") for claim in ("exp", "iat", "iss", "aud", "sub")),
    ],
)
def test_claims_that_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidToken):
        check(**changes)


def test_a_private_or_malformed_key_is_never_loaded() -> None:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
    public = public_jwks(key)["keys"][0]
    signing_key(public)  # the control
    for bad in (
        key.as_dict(private=True),
        {**public, "e": 3},
        {**public, "n": None},
        {name: value for name, value in public.items() if name != "n"},
        {**public, "e": "AAE"},  # e = 1
    ):
        with pytest.raises(InvalidToken):
            signing_key(bad)
