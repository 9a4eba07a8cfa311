"""The local Cognito identity pool: ``GetId`` and ``GetCredentialsForIdentity``
as Cognito answers them, for the template's ``AWS::Cognito::IdentityPool``.

moto's ``cognito-identity`` backend checks nothing: ``GetId`` hands out a new
random identity for any (or no) ``Logins``, ``GetCredentialsForIdentity``
returns the same fixed keys for any identity, with no role behind them and no
session tags, and it knows neither role attachments nor principal-tag maps.
:class:`LocalIdentityPool` does what Cognito does instead (enhanced flow):

- **The token.** ``Logins`` must hold exactly one token, of a provider the
  pool names (``cognito-idp.<region>.amazonaws.com/<user pool id>``): issuer
  = that provider, an RS256 signature by a key of that user pool's JWKS,
  ``aud`` = the provider's app client, not expired, ``token_use`` = ``id``
  (an access token has no ``aud``: refused, as Cognito refuses it). With
  ``ServerSideTokenCheck``, the user must still exist, be enabled, and not
  have signed out globally since the token was issued. No ``Logins`` is an
  unauthenticated identity: refused (``AllowUnauthenticatedIdentities`` is
  false). ``GetOpenIdToken`` (the classic flow's first step) is refused when
  ``AllowClassicFlow`` is false.
- **The identity.** One per (provider, ``sub``), the same for every token of
  the user; ``GetCredentialsForIdentity`` wants the login of that very user.
- **The credentials.** Those of the pool's ``authenticated`` role
  (``AWS::Cognito::IdentityPoolRoleAttachment``), issued only if that role's
  trust policy admits ``sts:AssumeRoleWithWebIdentity`` (and
  ``sts:TagSession`` for the tags) by ``cognito-identity.amazonaws.com`` with
  Cognito's condition keys (``cognito-identity.amazonaws.com:aud`` = the
  pool, ``:amr`` = ``authenticated``, the provider, its sign-in), and tagged
  from ``AWS::Cognito::IdentityPoolPrincipalTag`` (claim values, STS's tag
  rules). They are minted by moto's STS, valid one hour, for session
  ``CognitoIdentityCredentials`` as Cognito names it.

Cognito's error codes; its messages where they are known (signature, issuer,
expiry, audience, unauthenticated, mismatched logins), otherwise worded here.

The emulator's guard answers these calls with :meth:`LocalIdentityPool.call`
and records each issued key's role and tags, so that
``${aws:PrincipalTag/TenantId}`` has its value for the requests signed with
them. In-process (``mock_aws``), :func:`install` routes moto's own
``cognito-identity`` responses to a pool :func:`register` ed for the test.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from botocore.exceptions import ClientError
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey
from moto.cognitoidentity.responses import CognitoIdentityResponse
from moto.core.exceptions import JsonRESTError

from local_stack.cognito import user_pool as cognito
from local_stack.iam import policy_evaluation as iam
from local_stack.iam.sts import tag_errors
from local_stack.local_values import offline_values
from stack_model.roles import RoleDefinition, roles_from_template
from stack_model.template import ACCOUNT_ID, REGION, Values, resources
from support_tickets.core.identity import token_payload

SERVICE_PRINCIPAL = "cognito-identity.amazonaws.com"
SESSION_NAME = "CognitoIdentityCredentials"
CREDENTIALS_SECONDS = 3600

_lock = threading.Lock()
_registered: dict[str, LocalIdentityPool] = {}
_installed = False


class IdentityPoolError(Exception):
    """An answer Cognito gives instead of an identity or credentials (HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _not_authorized(message: str) -> IdentityPoolError:
    return IdentityPoolError("NotAuthorizedException", message)


def _invalid_token(reason: str) -> IdentityPoolError:
    return _not_authorized(f"Invalid login token. {reason}")


# ---------------------------------------------------------------- configuration
@dataclass(frozen=True)
class Provider:
    """A user pool as a provider of the identity pool."""

    name: str  # cognito-idp.<region>.amazonaws.com/<user pool id>
    client_id: str
    keys: Callable[[], KeySet | None]  # the user pool's current JWKS
    # ServerSideTokenCheck: whether the token's user may still have credentials.
    user_is_current: Callable[[Mapping[str, Any]], bool] | None = None

    @property
    def issuer(self) -> str:
        return f"https://{self.name}"


@dataclass(frozen=True)
class Issued:
    """Credentials the pool issued, and what the guard must know of them."""

    access_key_id: str
    secret_key: str
    session_token: str
    expiration: float  # epoch seconds
    role: RoleDefinition
    session_name: str
    tags: Mapping[str, str]


@dataclass
class LocalIdentityPool:
    identity_pool_id: str
    providers: Mapping[str, Provider]
    authenticated_role: RoleDefinition | None
    # provider name -> {principal tag: token claim}
    principal_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    allow_unauthenticated: bool = False
    allow_classic_flow: bool = False
    clock: Callable[[], float] = time.time
    _identities: dict[str, tuple[str, str]] = field(default_factory=dict)  # identity id -> (provider, sub)

    # ------------------------------------------------------------ the API
    def knows(self, identity_id: str) -> bool:
        with _lock:
            return identity_id in self._identities

    def call(self, action: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], Issued | None]:
        """The JSON answer to one call (and the credentials it issued), or
        :class:`IdentityPoolError`."""
        if action == "GetId":
            return self.get_id(params), None
        if action == "GetCredentialsForIdentity":
            issued = self.get_credentials_for_identity(params)
            credentials = {
                "AccessKeyId": issued.access_key_id,
                "SecretKey": issued.secret_key,
                "SessionToken": issued.session_token,
                "Expiration": issued.expiration,
            }
            return {"IdentityId": params.get("IdentityId"), "Credentials": credentials}, issued
        if action == "GetOpenIdToken" and not self.allow_classic_flow:
            raise IdentityPoolError(
                "InvalidParameterException", "Basic (classic) flow is not enabled, please use enhanced flow."
            )
        raise IdentityPoolError("InvalidParameterException", f"{action} is not served by the local identity pool.")

    def get_id(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if params.get("IdentityPoolId") != self.identity_pool_id:
            raise IdentityPoolError(
                "ResourceNotFoundException", f"IdentityPool '{params.get('IdentityPoolId')}' not found."
            )
        if params.get("AccountId") not in (None, ACCOUNT_ID):
            raise _not_authorized("Account id does not match the identity pool.")
        provider, claims = self._login(params.get("Logins"))
        identity_id = self._identity_of(provider.name, str(claims["sub"]))
        with _lock:
            self._identities[identity_id] = (provider.name, str(claims["sub"]))
        return {"IdentityId": identity_id}

    def get_credentials_for_identity(self, params: Mapping[str, Any]) -> Issued:
        identity_id = params.get("IdentityId")
        with _lock:
            login = self._identities.get(str(identity_id))
        if login is None:
            raise IdentityPoolError("ResourceNotFoundException", f"Identity '{identity_id}' not found.")
        if params.get("CustomRoleArn") is not None:
            # Only role mappings make a custom role choosable; this pool has none.
            raise IdentityPoolError(
                "InvalidParameterException", "CustomRoleArn needs role mappings; the pool has none."
            )
        provider, claims = self._login(params.get("Logins"))
        if (provider.name, str(claims["sub"])) != login:
            raise _not_authorized(
                "Logins don't match. Please include at least one valid login for this identity or identity pool."
            )
        return self._issue(str(identity_id), provider, claims)

    # ------------------------------------------------------------ the token
    def _login(self, logins: Any) -> tuple[Provider, dict[str, Any]]:
        if not logins:
            raise _not_authorized("Unauthenticated access is not supported for this identity pool.")
        if not isinstance(logins, Mapping) or len(logins) != 1:
            raise IdentityPoolError("InvalidParameterException", "Logins must name exactly one provider here.")
        ((name, token),) = logins.items()
        provider = self.providers.get(str(name))
        if provider is None:
            raise _not_authorized("Token is not from a supported provider of this identity pool.")
        return provider, self._verify(provider, token)

    def _verify(self, provider: Provider, token: Any) -> dict[str, Any]:
        unverified = token_payload(token) if isinstance(token, str) and " " not in token else None
        if unverified is None:
            raise _invalid_token("Not a valid OpenId Connect identity token.")
        if unverified.get("iss") != provider.issuer:
            raise _invalid_token("Issuer doesn't match providerName")
        keys = provider.keys()
        try:
            if keys is None:
                raise JoseError("no keys")
            claims = dict(jwt.decode(str(token), keys, algorithms=["RS256"]).claims)
        except (JoseError, ValueError, TypeError) as exc:
            raise _invalid_token("Couldn't verify signed token.") from exc
        if "aud" not in claims:
            raise _invalid_token("Missing a required claim: aud")
        if claims["aud"] != provider.client_id:
            raise _not_authorized("Token is not from a supported provider of this identity pool.")
        now = int(self.clock())
        expires = claims.get("exp")
        if not isinstance(expires, int) or now >= expires:
            raise _invalid_token(f"Token expired: {now} >= {expires}")
        if claims.get("token_use") != "id" or not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise _invalid_token("Not an ID token of this user pool.")
        if provider.user_is_current is not None and not provider.user_is_current(claims):
            raise _invalid_token("The user was deleted, disabled or signed out.")
        return claims

    def _identity_of(self, provider: str, sub: str) -> str:
        region = self.identity_pool_id.split(":", 1)[0]
        return f"{region}:{uuid.uuid5(uuid.NAMESPACE_URL, f'{self.identity_pool_id}|{provider}|{sub}')}"

    # ------------------------------------------------------------ the credentials
    def _issue(self, identity_id: str, provider: Provider, claims: Mapping[str, Any]) -> Issued:
        role = self.authenticated_role
        if role is None:
            raise IdentityPoolError("InvalidIdentityPoolConfigurationException", "No authenticated role is set.")
        tags = {
            tag: claims[claim]
            for tag, claim in self.principal_tags.get(provider.name, {}).items()
            if isinstance(claims.get(claim), str)
        }
        errors = tag_errors(list(tags.items()))
        if errors:
            raise IdentityPoolError("InvalidParameterException", "; ".join(errors))
        context: dict[str, Sequence[str]] = {
            f"{SERVICE_PRINCIPAL}:aud": [self.identity_pool_id],
            f"{SERVICE_PRINCIPAL}:amr": [
                "authenticated",
                provider.name,
                f"{provider.name}:CognitoSignIn:{claims['sub']}",
            ],
            f"{SERVICE_PRINCIPAL}:sub": [identity_id],
            **{f"aws:RequestTag/{key}": [value] for key, value in tags.items()},
        }
        if tags:
            context["aws:TagKeys"] = list(tags)
        for action in ["sts:AssumeRoleWithWebIdentity"] + (["sts:TagSession"] if tags else []):
            question = iam.Request(action, role.arn, context, (SERVICE_PRINCIPAL,))
            if iam.evaluate([role.trust_policy], question, trust=True) is not iam.Decision.ALLOW:
                raise IdentityPoolError(
                    "InvalidIdentityPoolConfigurationException",
                    "Invalid identity pool configuration. Check assigned IAM roles for this pool.",
                )
        return mint(role, SESSION_NAME, tags)


def mint(role: RoleDefinition, session_name: str, tags: Mapping[str, str]) -> Issued:
    """Role credentials from moto's STS (as Cognito gets them from STS)."""
    from moto.sts.models import sts_backends

    assumed = sts_backends[ACCOUNT_ID]["aws"].assume_role_with_web_identity(
        region_name="us-east-1",
        role_session_name=session_name,
        role_arn=role.arn,
        policy=None,
        duration=CREDENTIALS_SECONDS,
        external_id=None,
    )
    expiration = assumed.expiration.replace(tzinfo=UTC).timestamp()
    return Issued(
        assumed.access_key_id,
        assumed.secret_access_key,
        assumed.session_token,
        expiration,
        role,
        session_name,
        dict(tags),
    )


# ---------------------------------------------------------------- from the template
def _single(kind: str) -> tuple[str, dict[str, Any]]:
    found = resources(kind)
    if len(found) != 1:
        raise ValueError(f"the local stack serves exactly one {kind}, the template has {len(found)}")
    ((name, resource),) = found.items()
    return name, resource


def from_template(
    values: Values,
    roles: Mapping[str, RoleDefinition],
    user_pool_provider: Callable[[str, str], Provider],
) -> LocalIdentityPool:
    """The template's identity pool (resolved with ``values``, which must know
    the user pool, its client and the pool's id), its role attachment and
    principal-tag maps. ``user_pool_provider(name, client_id)`` makes a
    provider of a ``CognitoIdentityProviders`` entry."""
    pool_name, pool = _single("AWS::Cognito::IdentityPool")
    props = values.resolve(pool["Properties"])
    providers = {
        entry["ProviderName"]: user_pool_provider(entry["ProviderName"], entry["ClientId"])
        for entry in props.get("CognitoIdentityProviders", [])
    }
    _, attachment = _single("AWS::Cognito::IdentityPoolRoleAttachment")
    attached = values.resolve(attachment["Properties"])
    authenticated = attached.get("Roles", {}).get("authenticated")
    role = next((role for role in roles.values() if role.arn == authenticated), None)
    if attachment["Properties"].get("IdentityPoolId") != {"Ref": pool_name} or attached.get("RoleMappings"):
        raise ValueError("the role attachment must name the identity pool, without role mappings")
    tags: dict[str, dict[str, str]] = {}
    for resource in resources("AWS::Cognito::IdentityPoolPrincipalTag").values():
        mapped = values.resolve(resource["Properties"])
        if mapped.get("UseDefaults"):
            raise ValueError("UseDefaults principal tags (aud, sub) are not modelled locally")
        tags[mapped["IdentityProviderName"]] = dict(mapped.get("PrincipalTags") or {})
    return LocalIdentityPool(
        identity_pool_id=values.ref(pool_name),
        providers=providers,
        authenticated_role=role,
        principal_tags=tags,
        allow_unauthenticated=bool(props.get("AllowUnauthenticatedIdentities")),
        allow_classic_flow=bool(props.get("AllowClassicFlow")),
    )


def user_pool_provider(name: str, client_id: str, *, server_side_check: bool = True) -> Provider:
    """A provider backed by moto's user pool of that name: its JWKS is the
    pool's key of this start; with ``server_side_check`` the user must exist,
    be enabled and not be signed out since the token was issued."""
    pool_id = name.rsplit("/", 1)[1]

    def keys() -> KeySet | None:
        pool = cognito.find_pool(pool_id)
        return None if pool is None else KeySet.import_key_set(cognito.public_jwks(pool.json_web_key))  # type: ignore[arg-type]

    def user_is_current(claims: Mapping[str, Any]) -> bool:
        pool = cognito.find_pool(pool_id)
        user = pool.users.get(str(claims.get("cognito:username"))) if pool is not None else None
        if user is None or not user.enabled or user.id != claims.get("sub"):
            return False
        signed_out = cognito.signed_out_at(pool_id, user.username)
        return signed_out is None or int(claims.get("iat", 0)) > signed_out

    return Provider(name, client_id, keys, user_is_current if server_side_check else None)


def remote_user_pool_provider(name: str, client_id: str, *, endpoint_url: str) -> Provider:
    """A provider backed by the user pool another emulator holds (``endpoint_url``:
    a cell's shared pool, whose template parameters name it): its JWKS read from
    that emulator at each exchange; the user must exist there, be enabled and be
    the token's ``sub``. A global sign-out there is not seen here (its time is
    that emulator's own)."""
    from local_stack.running_stack import emulator_client

    pool_id = name.rsplit("/", 1)[1]

    def keys() -> KeySet | None:
        try:
            with urllib.request.urlopen(f"{endpoint_url}/{pool_id}/.well-known/jwks.json", timeout=5) as answer:  # noqa: S310 - the local emulator's URL
                return KeySet.import_key_set(json.load(answer))
        except urllib.error.HTTPError:
            return None

    def user_is_current(claims: Mapping[str, Any]) -> bool:
        try:
            user = emulator_client(endpoint_url, "cognito-idp").admin_get_user(
                UserPoolId=pool_id, Username=str(claims.get("cognito:username"))
            )
        except ClientError:
            return False
        attributes = {attribute["Name"]: attribute["Value"] for attribute in user.get("UserAttributes", [])}
        return bool(user.get("Enabled")) and attributes.get("sub") == claims.get("sub")

    return Provider(name, client_id, keys, user_is_current)


def in_process(
    identity_pool_id: str,
    user_pool_id: str,
    client_id: str,
    jwks: Mapping[str, Any],
    region: str = "us-east-1",
    *,
    parameters: Mapping[str, str] | None = None,
) -> LocalIdentityPool:
    """The template's identity pool for in-process tests (``mock_aws``, no
    emulator, no user pool): tokens of ``user_pool_id`` and ``client_id``
    signed by a key of ``jwks`` (the test's own), with the template's role,
    trust policy and principal tags, read with the template's ``parameters``. No
    server-side check: there are no users."""
    values = offline_values(
        user_pool_id=user_pool_id, client_id=client_id, identity_pool_id=identity_pool_id, parameters=parameters
    )
    if region != REGION:
        raise ValueError(f"the template is read for {REGION}")
    keys = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
    roles = roles_from_template(values)
    return from_template(values, roles, lambda name, client: Provider(name, client, lambda: keys))


@dataclass
class SigningUserPool:
    """A user pool reduced to what signs its ID tokens: an id, an app client and
    an RSA key, for in-process runs (tests, the benchmark's simulations) where
    no emulator holds a real pool. :meth:`identity_pool` is the template's
    identity pool for it."""

    user_pool_id: str
    client_id: str
    region: str = "us-east-1"
    key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(
            2048, parameters={"kid": "in-process", "alg": "RS256", "use": "sig"}
        )
    )

    @property
    def provider_name(self) -> str:
        return f"cognito-idp.{self.region}.amazonaws.com/{self.user_pool_id}"

    def sign(self, payload: Mapping[str, Any]) -> str:
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, dict(payload), self.key)

    def id_token(self, tenant_id: str, username: str, *, admin: bool = False, lifetime_seconds: int = 3600) -> str:
        """An ID token of ``username`` in ``tenant_id`` (``sub`` and ``jti``
        derived from them and the time), as Cognito would issue it."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant_id}/{username}")),
            "iss": f"https://{self.provider_name}",
            "aud": self.client_id,
            "token_use": "id",
            "cognito:username": username,
            "custom:tenant_id": tenant_id,
            "iat": now,
            "auth_time": now,
            "exp": now + lifetime_seconds,
            "jti": str(uuid.uuid4()),
        }
        if admin:
            payload["cognito:groups"] = ["admin"]
        return self.sign(payload)

    def identity_pool(self, identity_pool_id: str) -> LocalIdentityPool:
        return in_process(
            identity_pool_id, self.user_pool_id, self.client_id, cognito.public_jwks(self.key), self.region
        )


# ---------------------------------------------------------------- in-process (mock_aws)
def register(pool: LocalIdentityPool) -> None:
    """Serve ``pool`` to in-process boto3 clients under ``mock_aws``."""
    install()
    with _lock:
        _registered[pool.identity_pool_id] = pool


def unregister(pool: LocalIdentityPool) -> None:
    with _lock:
        _registered.pop(pool.identity_pool_id, None)


def _registered_for(params: Mapping[str, Any]) -> LocalIdentityPool:
    with _lock:
        pools = list(_registered.values())
    wanted = params.get("IdentityPoolId")
    for pool in pools:
        if pool.identity_pool_id == wanted or pool.knows(str(params.get("IdentityId"))):
            return pool
    raise JsonRESTError("ResourceNotFoundException", "No such identity pool or identity.")


def _served(action: str) -> Callable[[CognitoIdentityResponse], str]:
    def respond(self: CognitoIdentityResponse) -> str:
        params = json.loads(self.body or "{}")
        try:
            answer, _ = _registered_for(params).call(action, params)
        except IdentityPoolError as exc:
            raise JsonRESTError(exc.code, exc.message) from exc
        return json.dumps(answer)

    return respond


def install() -> None:
    """moto's ``cognito-identity`` answers ``GetId``, ``GetCredentialsForIdentity``
    and ``GetOpenIdToken`` with the registered pools only (never its unchecked
    defaults). Once per process (:func:`local_stack.emulator.moto_fixes.apply`)."""
    global _installed  # noqa: PLW0603 - patch once per process
    with _lock:
        if _installed:
            return
        for action, method in (
            ("GetId", "get_id"),
            ("GetCredentialsForIdentity", "get_credentials_for_identity"),
            ("GetOpenIdToken", "get_open_id_token"),
        ):
            served = functools.wraps(getattr(CognitoIdentityResponse, method))(_served(action))
            setattr(CognitoIdentityResponse, method, served)
        _installed = True
