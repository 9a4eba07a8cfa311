"""RS256 JSON Web Tokens verified against a Cognito user pool's JWKS, with the
standard library only.

Why no JWT library: the layer would need one *and* a crypto package
(``cryptography``, a compiled wheel of several MB whose import every cold
start of every function would pay) to do what takes one modular
exponentiation. Verifying an RSASSA-PKCS1-v1_5 signature (RFC 8017, 8.2.2)
needs no secret and no constant-time arithmetic: ``s^e mod n`` is re-encoded
and compared, byte for byte, with the one encoding the SHA-256 digest of the
signed input can have (EMSA-PKCS1-v1_5, 9.2). Nothing is parsed out of the
decrypted block, so the classic forgeries against lenient parsers
(Bleichenbacher's 2006 attack on ``e = 3`` keys) have nothing to exploit; keys
under 2048 bits are refused. ``tests/unit/test_jwks.py`` checks it against
tokens signed by ``joserfc`` (the local user pool's signer) and tampered ones.

:class:`Jwks` keeps a pool's key set for the life of the container: fetched
on first use, fetched again (once, at most every :data:`REFETCH_INTERVAL_SECONDS`)
when a token names a key id it does not hold (Cognito rotating its keys), so a
flood of tokens with made-up key ids costs one fetch, not one per token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

# DER of DigestInfo{sha256, NULL} without the digest (RFC 8017, 9.2, note 1).
_SHA256_DIGEST_INFO: Final = bytes.fromhex("3031300d060960864801650304020105000420")
MIN_MODULUS_BITS: Final = 2048
REFETCH_INTERVAL_SECONDS: Final = 60.0
FETCH_TIMEOUT_SECONDS: Final = 3.0
MAX_TOKEN_LENGTH: Final = 16 * 1024
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")


class InvalidToken(ValueError):
    """Not a token this verifier accepts (the reason is for logs, never for the caller)."""


def b64url_decode(segment: str) -> bytes:
    """Strict base64url without padding (RFC 7515, 2): any other character is
    refused, and so is any encoding but the canonical one of its bytes (unused
    trailing bits set): else one signature has several spellings, each of them a
    new entry in API Gateway's authorizer cache."""
    if not _SEGMENT.fullmatch(segment) or len(segment) % 4 == 1:
        raise InvalidToken("not base64url")
    try:
        decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken("not base64url") from exc
    if base64.urlsafe_b64encode(decoded).rstrip(b"=") != segment.encode("ascii"):
        raise InvalidToken("not canonical base64url")
    return decoded


def _uint(value: object) -> int:
    if not isinstance(value, str) or not value:
        raise InvalidToken("key parameter")
    return int.from_bytes(b64url_decode(value), "big")


@dataclass(frozen=True, slots=True)
class RsaPublicKey:
    n: int
    e: int

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> RsaPublicKey:
        if jwk.get("kty") != "RSA" or jwk.get("alg", "RS256") != "RS256" or jwk.get("use", "sig") != "sig":
            raise InvalidToken("not an RS256 signing key")
        key = cls(n=_uint(jwk.get("n")), e=_uint(jwk.get("e")))
        if key.n.bit_length() < MIN_MODULUS_BITS or key.e < 3 or key.e % 2 == 0:
            raise InvalidToken("weak key")
        return key

    def verify(self, signing_input: bytes, signature: bytes) -> bool:
        """RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017, 8.2.2)."""
        size = (self.n.bit_length() + 7) // 8
        if len(signature) != size:
            return False
        s = int.from_bytes(signature, "big")
        if s >= self.n:
            return False
        encoded = pow(s, self.e, self.n).to_bytes(size, "big")
        t = _SHA256_DIGEST_INFO + hashlib.sha256(signing_input).digest()
        expected = b"\x00\x01" + b"\xff" * (size - len(t) - 3) + b"\x00" + t
        return hmac.compare_digest(encoded, expected)


def split_token(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """``(header, payload, signing input, signature)`` of a compact JWS; nothing verified."""
    if len(token) > MAX_TOKEN_LENGTH:
        raise InvalidToken("too long")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("not a compact JWS")
    decoded = []
    for part in parts[:2]:
        try:
            value = json.loads(b64url_decode(part))
        except (ValueError, RecursionError) as exc:
            raise InvalidToken("not JSON") from exc
        if not isinstance(value, dict):
            raise InvalidToken("not a JSON object")
        decoded.append(value)
    return decoded[0], decoded[1], f"{parts[0]}.{parts[1]}".encode("ascii"), b64url_decode(parts[2])


Fetch = Callable[[str], Mapping[str, Any]]


def fetch_json(url: str) -> Mapping[str, Any]:
    if not url.startswith(("https://", "http://")):
        raise InvalidToken("JWKS URL")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310 - checked above
        loaded = json.load(response)
    if not isinstance(loaded, dict):
        raise InvalidToken("JWKS is not an object")
    return loaded


class Jwks:
    """A user pool's signing keys, cached per container."""

    def __init__(
        self,
        url: str,
        *,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.monotonic,
        refetch_interval: float = REFETCH_INTERVAL_SECONDS,
    ) -> None:
        self.url = url
        self._fetch = fetch
        self._clock = clock
        self._refetch_interval = refetch_interval
        self._keys: dict[str, RsaPublicKey] | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()
        self.fetches = 0

    def key(self, kid: str) -> RsaPublicKey:
        with self._lock:
            if self._keys is None or (
                kid not in self._keys and self._clock() - self._fetched_at >= self._refetch_interval
            ):
                self._load()
            assert self._keys is not None
            found = self._keys.get(kid)
        if found is None:
            raise InvalidToken("unknown key id")
        return found

    def _load(self) -> None:
        document = (self._fetch or fetch_json)(self.url)
        self.fetches += 1
        self._fetched_at = self._clock()
        keys: dict[str, RsaPublicKey] = {}
        for jwk in document.get("keys") or []:
            if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str):
                continue
            try:
                keys[jwk["kid"]] = RsaPublicKey.from_jwk(jwk)
            except InvalidToken:
                continue  # a key we would never accept a signature from
        self._keys = keys

    def verify(self, token: str) -> dict[str, Any]:
        """The payload of ``token`` if a key of this set signed it with RS256."""
        header, payload, signing_input, signature = split_token(token)
        if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str) or "crit" in header:
            raise InvalidToken("header")
        if not self.key(header["kid"]).verify(signing_input, signature):
            raise InvalidToken("signature")
        return payload
