"""ID tokens (RS256 JWTs) verified against a Cognito user pool's key set, with ``cryptography``'s RSA.

``cryptography`` ships with the authorizer function only
(``functions/authorizer/requirements.txt``), never in the shared layer: no
other function pays its import on its cold start. This module is in the layer
with the rest of the authorizer's logic, so it imports ``cryptography`` only
when a key is loaded or a signature checked, which only the authorizer does.

The signature is ``cryptography``'s: RSASSA-PKCS1-v1_5 with SHA-256 (RS256),
by the public key built from the JWK's ``n`` and ``e``, the very calls PyJWT
makes. What is ours is what JWT verification is around it (RFC 7519, 7.2),
the checks PyJWT's ``jwt.decode`` made here before, and no fewer (PyJWT's
import loads every ``cryptography`` algorithm and ``x509``, which these tokens
never use: a sixth of the authorizer's cold start, bench/results.md). What
verifies, and nothing else:

- a compact JWS in canonical base64url (no padding, no other character, no
  set unused trailing bit: else one token has many spellings, each a new entry
  in API Gateway's authorizer cache and a new token exchange) of at most
  :data:`MAX_TOKEN_LENGTH` characters, whose header is a JSON object with
  ``alg`` RS256 (``none``, HMAC and every other algorithm are refused before
  any key is looked up), a ``kid`` string, and no ``crit`` (Cognito sets none);
- signed (over ``header.payload``, as sent) by the key of that ``kid`` in the
  pool's set, an RSA signing key for RS256 of at least 2048 bits (any other
  key of the document is dropped when it is read), the payload a JSON object;
- ``exp``, ``iat``, ``iss``, ``aud`` and ``sub`` present (not null);
  ``exp`` after now, ``iat`` and (when present) ``nbf`` not after now, each an
  integer (no leeway); ``iss`` the string the caller pins; ``aud`` a string or
  a list of strings naming one of the audiences the caller allows; ``sub`` and
  (when present) ``jti`` strings. The authorizer checks more on top
  (:class:`support_tickets.auth.authorizer.TokenVerifier`: ``token_use``, ``aud``
  a single allowed client, ``exp`` a number).

The key set is cached per container: fetched on first use, kept for
:data:`KEY_SET_LIFESPAN_SECONDS` (a key Cognito withdraws stops verifying
within that time), and fetched again, at most once every
:data:`REFETCH_INTERVAL_SECONDS`, when a token names a key id it does not hold
(Cognito rotating its keys): a flood of tokens with made-up key ids costs one
fetch, not one per token. A fetch that fails is an error, never a refused token.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

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


def _b64decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


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
            decoded = _b64decode(segment)
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


def _uint(value: object) -> int:
    """A JWK's base64url unsigned integer (RFC 7518, 2), as PyJWT reads it."""
    if not isinstance(value, str):
        raise InvalidToken("key parameters")
    try:
        return int.from_bytes(_b64decode(value), "big")
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken("key parameters") from exc


def signing_key(jwk: Mapping[str, Any]) -> RSAPublicKey:
    """``jwk`` as a key this module verifies with, or :class:`InvalidToken`: an
    RSA public key (no private part) for RS256 signatures, of at least
    :data:`MIN_MODULUS_BITS` bits."""
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers

    if jwk.get("kty") != "RSA" or jwk.get("alg", ALGORITHM) != ALGORITHM or jwk.get("use", "sig") != "sig":
        raise InvalidToken("not an RS256 signing key")
    if "d" in jwk or "oth" in jwk or "n" not in jwk or "e" not in jwk:
        raise InvalidToken("not an RSA public key")
    try:
        key = RSAPublicNumbers(_uint(jwk["e"]), _uint(jwk["n"])).public_key()
    except ValueError as exc:  # cryptography refuses an even or tiny exponent, an even modulus
        raise InvalidToken("key parameters") from exc
    if key.key_size < MIN_MODULUS_BITS:
        raise InvalidToken("weak key")
    return key


def _usable(jwk: object) -> RSAPublicKey | None:
    if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str) or not jwk["kid"]:
        return None
    try:
        return signing_key(jwk)
    except InvalidToken:
        return None


def _json_object(segment: str, what: str) -> dict[str, Any]:
    try:
        loaded = json.loads(_b64decode(segment))
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested too deep
        raise InvalidToken(what) from exc
    if not isinstance(loaded, dict):
        raise InvalidToken(what)
    return loaded


def _integer(claims: Mapping[str, Any], name: str) -> int:
    try:
        return int(claims[name])
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidToken(name) from exc


def check_claims(claims: Mapping[str, Any], *, issuer: str, audience: Collection[str], now: float) -> None:
    """:class:`InvalidToken` unless ``claims`` pass the checks of the module's
    docstring (those of PyJWT's ``jwt.decode`` with ``require`` =
    :data:`REQUIRED_CLAIMS`, the issuer pinned, the audiences given, no leeway)."""
    for name in REQUIRED_CLAIMS:
        if claims.get(name) is None:
            raise InvalidToken(f"no {name}")
    if _integer(claims, "iat") > now:
        raise InvalidToken("iat in the future")
    if "nbf" in claims and _integer(claims, "nbf") > now:
        raise InvalidToken("not yet valid")
    if _integer(claims, "exp") <= now:
        raise InvalidToken("expired")
    if not isinstance(claims["iss"], str) or claims["iss"] != issuer:
        raise InvalidToken("iss")
    audiences = claims["aud"]
    if isinstance(audiences, str):
        audiences = [audiences]
    if not isinstance(audiences, list) or not all(isinstance(one, str) for one in audiences):
        raise InvalidToken("aud")
    if not any(allowed in audiences for allowed in audience):
        raise InvalidToken("aud")
    if not isinstance(claims["sub"], str) or ("jti" in claims and not isinstance(claims["jti"], str)):
        raise InvalidToken("sub or jti")


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
        self.fetches = 0
        self._fetch = fetch
        self._lifespan = lifespan
        self._refetch_interval = refetch_interval
        self._keys: dict[str, RSAPublicKey] | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()

    def _refresh(self) -> dict[str, RSAPublicKey]:
        # fetch_json is looked up now, not when the set was built (tests and the event runner replace it).
        document = (self._fetch or fetch_json)(self.url)
        listed = document.get("keys")
        keys: dict[str, RSAPublicKey] = {}
        for jwk in listed if isinstance(listed, list) else []:
            key = _usable(jwk)
            if key is not None:
                keys.setdefault(jwk["kid"], key)  # the first of a kid, as PyJWT's lookup took
        self.fetches += 1
        self._keys, self._fetched_at = keys, time.monotonic()
        return keys

    def key(self, kid: str) -> RSAPublicKey:
        """The key ``kid`` names in the set (cached, or fetched: see the module's docstring)."""
        with self._lock:
            keys = self._keys
            if keys is None or time.monotonic() > self._fetched_at + self._lifespan:
                keys = self._refresh()
            key = keys.get(kid)
            if key is None and time.monotonic() - self._fetched_at >= self._refetch_interval:
                key = self._refresh().get(kid)
        if key is None:
            raise InvalidToken("unknown kid")
        return key

    def verify(self, token: str, *, issuer: str, audience: Collection[str]) -> dict[str, Any]:
        """The claims of ``token`` if a key of this set signed it with RS256 for
        ``issuer`` and one of ``audience``; :class:`InvalidToken` otherwise."""
        if len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("too long")
        check_canonical(token)
        header_segment, payload_segment, signature_segment = token.split(".")
        header = _json_object(header_segment, "header")
        if header.get("alg") != ALGORITHM or not isinstance(header.get("kid"), str) or "crit" in header:
            raise InvalidToken("header")
        key = self.key(header["kid"])

        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
        from cryptography.hazmat.primitives.hashes import SHA256

        signed = f"{header_segment}.{payload_segment}".encode("ascii")
        try:
            key.verify(_b64decode(signature_segment), signed, PKCS1v15(), SHA256())
        except (InvalidSignature, ValueError) as exc:
            raise InvalidToken("signature") from exc
        claims = _json_object(payload_segment, "payload")
        check_claims(claims, issuer=issuer, audience=audience, now=time.time())
        return claims
