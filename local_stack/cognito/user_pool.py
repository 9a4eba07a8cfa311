"""The local user pool, as strict as Cognito's: moto's user pools, made to
keep their own configuration and to sign with a key nobody else has.

**Signing keys.** moto signs every pool's tokens with one RSA key shipped in
its package, so anyone could mint a token for any tenant that the local
gateway would accept. :func:`new_signing_key` makes a fresh key (the emulator
calls it at every start); every pool created afterwards signs with it, under
its own ``kid``, and ``/<pool id>/.well-known/jwks.json`` serves that pool's
public key only (404 for a pool that does not exist).

**Global sign-out** is remembered per user (:func:`signed_out_at`), for the
identity pool's server-side token check (:mod:`local_stack.cognito.identity_pool`).

**Pool and client rules** moto ignores, enforced by moto's own backend (so
through the emulator and under ``mock_aws`` alike), with Cognito's errors:

- ``AdminCreateUserConfig.AllowAdminCreateUserOnly``: ``SignUp`` is refused.
- Immutable attributes (``Mutable: false``, e.g. ``custom:tenant_id``) are set
  at creation only: ``AdminUpdateUserAttributes``, ``UpdateUserAttributes``
  and ``AdminDeleteUserAttributes`` refuse them.
- An app client's ``WriteAttributes``: ``UpdateUserAttributes`` (the user's
  own access token) may write only those (all mutable ones when unset).
- An app client's ``ExplicitAuthFlows``: ``InitiateAuth`` and
  ``AdminInitiateAuth`` run only the flows the client enables (Cognito's
  defaults when unset).

Which Cognito calls need IAM credentials (the admin and management APIs) is
the guard's part: :data:`PUBLIC_ACTIONS` are the only ones it lets through
unsigned.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey
from moto.cognitoidp import models, urls
from moto.cognitoidp.exceptions import InvalidParameterException, NotAuthorizedError
from moto.cognitoidp.models import CognitoIdpBackend, CognitoIdpUserPool, CognitoIdpUserPoolClient, cognitoidp_backends
from moto.cognitoidp.responses import CognitoIdpJsonWebKeyResponse

# Cognito's unauthenticated and token-authorized operations (Developer Guide,
# "API operations grouped by authorization model"): everything else needs IAM.
PUBLIC_ACTIONS = frozenset(
    {
        "AssociateSoftwareToken",
        "ChangePassword",
        "CompleteWebAuthnRegistration",
        "ConfirmDevice",
        "ConfirmForgotPassword",
        "ConfirmSignUp",
        "DeleteUser",
        "DeleteUserAttributes",
        "DeleteWebAuthnCredential",
        "ForgetDevice",
        "ForgotPassword",
        "GetDevice",
        "GetTokensFromRefreshToken",
        "GetUser",
        "GetUserAttributeVerificationCode",
        "GetUserAuthFactors",
        "GlobalSignOut",
        "InitiateAuth",
        "ListDevices",
        "ListWebAuthnCredentials",
        "ResendConfirmationCode",
        "RespondToAuthChallenge",
        "RevokeToken",
        "SetUserMFAPreference",
        "SetUserSettings",
        "SignUp",
        "StartWebAuthnRegistration",
        "UpdateAuthEventFeedback",
        "UpdateDeviceStatus",
        "UpdateUserAttributes",
        "VerifySoftwareToken",
        "VerifyUserAttribute",
    }
)

# The ExplicitAuthFlows value that enables each AuthFlow (and its legacy name).
_FLOW_SETTINGS = {
    "USER_SRP_AUTH": {"ALLOW_USER_SRP_AUTH"},
    "USER_PASSWORD_AUTH": {"ALLOW_USER_PASSWORD_AUTH", "USER_PASSWORD_AUTH"},
    "ADMIN_USER_PASSWORD_AUTH": {"ALLOW_ADMIN_USER_PASSWORD_AUTH", "ADMIN_NO_SRP_AUTH"},
    "ADMIN_NO_SRP_AUTH": {"ALLOW_ADMIN_USER_PASSWORD_AUTH", "ADMIN_NO_SRP_AUTH"},
    "REFRESH_TOKEN_AUTH": {"ALLOW_REFRESH_TOKEN_AUTH"},
    "REFRESH_TOKEN": {"ALLOW_REFRESH_TOKEN_AUTH"},
    "CUSTOM_AUTH": {"ALLOW_CUSTOM_AUTH", "CUSTOM_AUTH_FLOW_ONLY"},
    "USER_AUTH": {"ALLOW_USER_AUTH"},
}
# What a client created without ExplicitAuthFlows allows (CreateUserPoolClient).
_DEFAULT_FLOWS = frozenset({"ALLOW_USER_SRP_AUTH", "ALLOW_CUSTOM_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"})

_lock = threading.Lock()
_signing_key: RSAKey | None = None
_installed = False
# (user pool id, user name) -> when the user last signed out globally (epoch s).
_signed_out: dict[tuple[str, str], int] = {}


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


def find_pool(pool_id: str) -> CognitoIdpUserPool | None:
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
    pool = find_pool(pool_id)
    if pool is None:
        return 404, {"Content-Type": "application/json"}, b'{"message": "User pool not found"}'
    body = json.dumps(public_jwks(pool.json_web_key)).encode()
    return 200, {"Content-Type": "application/json"}, body


def signed_out_at(pool_id: str, username: str) -> int | None:
    """When the user last signed out globally (``GlobalSignOut``,
    ``AdminUserGlobalSignOut``): Cognito refuses that user's earlier tokens
    where it checks them server-side (the identity pool's
    ``ServerSideTokenCheck``). moto keeps no such time."""
    with _lock:
        return _signed_out.get((pool_id, username))


def _record_sign_out(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def sign_out(self: CognitoIdpUserPool, username: str) -> None:
        original(self, username)
        with _lock:
            _signed_out[(self.id, username)] = int(time.time())

    return sign_out


# ---------------------------------------------------------------- pool and client rules
def _pool_of_client(backend: CognitoIdpBackend, client_id: str) -> CognitoIdpUserPool | None:
    return next((pool for pool in backend.user_pools.values() if client_id in pool.clients), None)


def check_auth_flow(client: CognitoIdpUserPoolClient, auth_flow: str) -> None:
    """InvalidParameterException unless the client enables ``auth_flow``."""
    configured = client.extended_config.get("ExplicitAuthFlows")
    enabled = set(configured) if configured else set(_DEFAULT_FLOWS)
    if not enabled & _FLOW_SETTINGS.get(auth_flow, set()):
        raise InvalidParameterException(f"{auth_flow} flow not enabled for this client")


def _check_mutable(pool: CognitoIdpUserPool, names: Iterable[str]) -> None:
    for name in names:
        attribute = pool.schema_attributes.get(name)
        if attribute is not None and not attribute.mutable:
            raise InvalidParameterException(f"Invalid user attributes: user.{name}: Attribute cannot be updated.")


def _check_client_may_write(client: CognitoIdpUserPoolClient | None, names: Iterable[str]) -> None:
    writable = client.extended_config.get("WriteAttributes") if client is not None else None
    if writable is not None and any(name not in writable for name in names):
        raise NotAuthorizedError("A client attempted to write unauthorized attribute")


def _names(attributes: Iterable[Any]) -> list[str]:
    return [str(item["Name"] if isinstance(item, dict) else item) for item in attributes]


def _wrap(name: str, before: Callable[..., None]) -> None:
    original = getattr(CognitoIdpBackend, name)

    @functools.wraps(original)
    def checked(self: CognitoIdpBackend, *args: Any, **kwargs: Any) -> Any:
        before(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    setattr(CognitoIdpBackend, name, checked)


def _sign_up(backend: CognitoIdpBackend, client_id: str, *_: Any, **__: Any) -> None:
    pool = _pool_of_client(backend, client_id)
    if pool is not None and pool.extended_config.get("AdminCreateUserConfig", {}).get("AllowAdminCreateUserOnly"):
        raise NotAuthorizedError("SignUp is not permitted for this user pool")


def _update_user_attributes(backend: CognitoIdpBackend, access_token: str, attributes: list[Any]) -> None:
    for pool in backend.user_pools.values():
        if access_token in pool.access_tokens:
            client_id, _ = pool.access_tokens[access_token]
            _check_client_may_write(pool.clients.get(client_id), _names(attributes))
            _check_mutable(pool, _names(attributes))
            return


def _admin_update_user_attributes(
    backend: CognitoIdpBackend, user_pool_id: str, username: str, attributes: list[Any]
) -> None:
    _check_mutable(backend.describe_user_pool(user_pool_id), _names(attributes))


def _initiate_auth(backend: CognitoIdpBackend, client_id: str, auth_flow: str, *_: Any, **__: Any) -> None:
    pool = _pool_of_client(backend, client_id)
    if pool is not None:
        check_auth_flow(pool.clients[client_id], auth_flow)


def _admin_initiate_auth(
    backend: CognitoIdpBackend, user_pool_id: str, client_id: str, auth_flow: str, *_: Any, **__: Any
) -> None:
    client = backend.describe_user_pool(user_pool_id).clients.get(client_id)
    if client is not None:
        check_auth_flow(client, auth_flow)


def install() -> None:
    """Apply both to moto, once per process (:func:`local_stack.emulator.moto_fixes.apply`)."""
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
    _wrap("sign_up", _sign_up)
    _wrap("update_user_attributes", _update_user_attributes)
    _wrap("admin_update_user_attributes", _admin_update_user_attributes)
    _wrap("admin_delete_user_attributes", _admin_update_user_attributes)
    _wrap("initiate_auth", _initiate_auth)
    _wrap("admin_initiate_auth", _admin_initiate_auth)
    CognitoIdpUserPool.sign_out = _record_sign_out(CognitoIdpUserPool.sign_out)  # type: ignore[method-assign]
    _installed = True
