"""ID tokens (RS256 JWTs) verified against a Cognito user pool's key set, by PyJWT.

PyJWT and ``cryptography`` ship with the authorizer function only
(``functions/authorizer/requirements.txt``), never in the shared layer: no
other function pays their import on its cold start. This module is in the
layer with the rest of the authorizer's logic, so it imports :mod:`jwt` only
when a key set is built (:class:`Jwks`), which only the authorizer does.

What verifies, and nothing else:

- a compact JWS in canonical base64url (no padding, no other character, no
  set unused trailing bit: else one token has many spellings, each a new entry
  in API Gateway's authorizer cache and a new token exchange) whose header has
  ``alg`` RS256 (``none``, HMAC and every other algorithm are refused before
  any key is looked up), a ``kid``, and no
  ``crit`` (Cognito sets none; PyJWT would honour ``b64``);
- signed by a key of the pool's set that is an RSA signing key for RS256 of at
  least 2048 bits (any other key of the document is dropped when it is read);
- ``iss`` and ``aud`` equal to what the caller pins, and ``exp``, ``iat``,
  ``iss``, ``aud`` and ``sub`` present, checked by ``jwt.decode``.

The key set is PyJWT's :class:`jwt.PyJWKClient` cache: fetched on first use,
kept for :data:`KEY_SET_LIFESPAN_SECONDS` (a key Cognito withdraws stops
verifying within that time), and fetched again, at most once every
:data:`REFETCH_INTERVAL_SECONDS`, when a token names a key id it does not hold
(Cognito rotating its keys): a flood of tokens with made-up key ids costs one
fetch, not one per token. A fetch that fails is an error, never a refused token.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from jwt import PyJWK, PyJWKClient

ALGORITHM: Final = "RS256"
MIN_MODULUS_BITS: Final = 2048
KEY_SET_LIFESPAN_SECONDS: Final = 600.0
REFETCH_INTERVAL_SECONDS: Final = 60.0
FETCH_TIMEOUT_SECONDS: Final = 3.0
MAX_TOKEN_LENGTH: Final = 16 * 1024
REQUIRED_CLAIMS: Final = ("exp", "iat", "iss", "aud", "sub")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


class InvalidToken(ValueError):
    """Not a token this verifier accepts (the reason is for logs, never for the caller)."""


Fetch = Callable[[str], Mapping[str, Any]]


def check_canonical(token: str) -> None:
    """:class:`InvalidToken` unless ``token`` is three segments of canonical
    base64url (RFC 7515, 2): the only spelling of its bytes."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("not a compact JWS")
    for segment in parts:
        if not _SEGMENT.fullmatch(segment) or len(segment) % 4 == 1:
            raise InvalidToken("not base64url")
        try:
            decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        except (binascii.Error, ValueError) as exc:
            raise InvalidToken("not base64url") from exc
        if base64.urlsafe_b64encode(decoded).rstrip(b"=") != segment.encode("ascii"):
            raise InvalidToken("not canonical base64url")


def fetch_json(url: str) -> Mapping[str, Any]:
    if not url.startswith(("https://", "http://")):
        raise InvalidToken("JWKS URL")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310 - checked above
        loaded = json.load(response)
    if not isinstance(loaded, dict):
        raise InvalidToken("JWKS is not an object")
    return loaded


def signing_key(jwk: Mapping[str, Any]) -> PyJWK:
    """``jwk`` as a key this module verifies with, or :class:`InvalidToken`."""
    from jwt import PyJWK, PyJWTError

    if jwk.get("kty") != "RSA" or jwk.get("alg", ALGORITHM) != ALGORITHM or jwk.get("use", "sig") != "sig":
        raise InvalidToken("not an RS256 signing key")
    try:
        key = PyJWK(dict(jwk), algorithm=ALGORITHM)
    except (PyJWTError, ValueError) as exc:  # cryptography refuses an even or tiny exponent
        raise InvalidToken("key parameters") from exc
    if key.key.key_size < MIN_MODULUS_BITS:
        raise InvalidToken("weak key")
    return key


def _usable(jwk: object) -> bool:
    if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str):
        return False
    try:
        signing_key(jwk)
    except InvalidToken:
        return False
    return True


def _key_set_client(url: str, fetch: Fetch | None, lifespan: float, refetch_interval: float) -> PyJWKClient:
    from jwt import PyJWKClient

    class KeySetClient(PyJWKClient):
        """PyJWT's key-set cache over our fetch, keeping only the keys we accept."""

        fetches = 0

        def fetch_data(self) -> Any:
            # PyJWKClient documents fetch_data as the one step a subclass replaces:
            # its caches and refetch cooldown stay the library's.
            document = (fetch or fetch_json)(self.uri)
            keys = document.get("keys")
            usable = {"keys": [jwk for jwk in keys if _usable(jwk)] if isinstance(keys, list) else []}
            self.fetches += 1
            if self.jwk_set_cache is not None:
                self.jwk_set_cache.put(usable)
            self._last_successful_fetch = time.monotonic()
            return usable

    return KeySetClient(url, lifespan=lifespan, cooldown_duration=refetch_interval, timeout=FETCH_TIMEOUT_SECONDS)


class Jwks:
    """A user pool's signing keys, cached per container, and the tokens they signed."""

    def __init__(
        self,
        url: str,
        *,
        fetch: Fetch | None = None,
        lifespan: float = KEY_SET_LIFESPAN_SECONDS,
        refetch_interval: float = REFETCH_INTERVAL_SECONDS,
    ) -> None:
        self.url = url
        self._client = _key_set_client(url, fetch, lifespan, refetch_interval)

    @property
    def fetches(self) -> int:
        return int(getattr(self._client, "fetches", 0))

    def verify(self, token: str, *, issuer: str, audience: Collection[str]) -> dict[str, Any]:
        """The claims of ``token`` if a key of this set signed it with RS256 for
        ``issuer`` and one of ``audience``; :class:`InvalidToken` otherwise."""
        import jwt

        if len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("too long")
        check_canonical(token)
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != ALGORITHM or not isinstance(header.get("kid"), str) or "crit" in header:
                raise InvalidToken("header")
            key = self._client.get_signing_key(header["kid"])
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                issuer=issuer,
                audience=list(audience),
                options={"require": list(REQUIRED_CLAIMS), "enforce_minimum_key_length": True},
            )
        except jwt.PyJWKClientConnectionError:
            raise  # an outage of the key set is an error (API Gateway's 500), never a 401
        except jwt.PyJWTError as exc:
            raise InvalidToken(type(exc).__name__) from exc
        return claims
