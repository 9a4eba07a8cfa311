"""The local user pool, as strict as Cognito's: moto's user pools, made to
sign with a key nobody else has.

**Signing keys.** moto signs every pool's tokens with one RSA key shipped in
its package, so anyone could mint a token for any tenant that the local
gateway would accept. :func:`new_signing_key` makes a fresh key (the emulator
calls it at every start); every pool created afterwards signs with it, under
its own ``kid``, and ``/<pool id>/.well-known/jwks.json`` serves that pool's
public key only (404 for a pool that does not exist).
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
from typing import Any
from urllib.parse import urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey
from moto.cognitoidp import models, urls
from moto.cognitoidp.models import CognitoIdpUserPool, cognitoidp_backends
from moto.cognitoidp.responses import CognitoIdpJsonWebKeyResponse

_lock = threading.Lock()
_signing_key: RSAKey | None = None
_installed = False


# ---------------------------------------------------------------- signing keys
def new_signing_key() -> RSAKey:
    """A fresh RS256 key, used by every user pool created from now on."""
    global _signing_key  # noqa: PLW0603 - the process's current key
    key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(8), "alg": "RS256", "use": "sig"})
    with _lock:
        _signing_key = key
    return key


def _current_key() -> RSAKey:
    with _lock:
        key = _signing_key
    return key if key is not None else new_signing_key()


def public_jwks(key: RSAKey) -> dict[str, Any]:
    return {"keys": [key.as_dict(private=False)]}


class _SigningJwt:
    """``jwt`` as moto's cognitoidp module sees it: it signs under the pool
    key's own ``kid`` (moto writes the bundled key's "dummy")."""

    def __getattr__(self, name: str) -> Any:
        return getattr(jwt, name)

    @staticmethod
    def encode(header: dict[str, Any], claims: dict[str, Any], key: Any, *args: Any, **kwargs: Any) -> str:
        kid = key.kid if isinstance(key, RSAKey) else None
        return jwt.encode({**header, "kid": kid} if kid else header, claims, key, *args, **kwargs)


def _find_pool(pool_id: str) -> CognitoIdpUserPool | None:
    region = pool_id.split("_", 1)[0]
    for account_backends in list(cognitoidp_backends.values()):
        backend = account_backends.get(region)
        pool = backend.user_pools.get(pool_id) if backend is not None else None
        if pool is not None:
            return pool
    return None


def _serve_json_web_key(*args: Any) -> tuple[int, dict[str, str], bytes]:
    # Called by moto's server with (request, full_url, headers).
    pool_id = urlsplit(str(args[1])).path.strip("/").split("/")[0]
    pool = _find_pool(pool_id)
    if pool is None:
        return 404, {"Content-Type": "application/json"}, b'{"message": "User pool not found"}'
    body = json.dumps(public_jwks(pool.json_web_key)).encode()
    return 200, {"Content-Type": "application/json"}, body


def install() -> None:
    """Apply to moto, once per process (:func:`local_stack.moto_fixes.apply`)."""
    global _installed  # noqa: PLW0603 - patch once per process
    if _installed:
        return
    original_init = CognitoIdpUserPool.__init__

    @functools.wraps(original_init)
    def init(self: CognitoIdpUserPool, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.json_web_key = _current_key()

    CognitoIdpUserPool.__init__ = init  # type: ignore[method-assign]
    models.jwt = _SigningJwt()  # type: ignore[attr-defined,assignment]
    CognitoIdpJsonWebKeyResponse.serve_json_web_key = staticmethod(_serve_json_web_key)  # type: ignore[method-assign]
    # moto's URL map holds the function itself, taken when its module was imported.
    for path in list(urls.url_paths):
        if path.endswith("/.well-known/jwks.json$"):
            urls.url_paths[path] = _serve_json_web_key
    _installed = True
