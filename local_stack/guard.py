"""The IAM guard in front of the emulator: what AWS would refuse, refused.

moto answers every request as if IAM allowed it, whoever signed it. The
guard is a WSGI middleware in front of moto's server: it verifies each signed
request's SigV4 signature against the secret the emulator issued for its key
(:mod:`local_stack.sigv4`, the keys in :mod:`local_stack.sessions`; an unknown
key, a session token that is not the key's, a timestamp too far from the clock
or a wrong signature are refused as the service refuses them), then routes it
by service and evaluates the template's policies for it with
:mod:`local_stack.iam`. A role's policies are its inline ones and its AWS
managed policies (see :mod:`stack_model.roles`):

- **STS AssumeRole** (any caller): validated and authorized as STS does
  (:mod:`local_stack.sts`: the target must be a role of the template, its
  trust policy and the caller's own policies must allow it). When moto then
  issues the credentials, the guard records their access key id, secret and
  session token with the role, the session name and the session tags: that
  is how
  ``${aws:PrincipalTag/...}`` gets its value later. Other credential-minting
  STS actions are refused (the guard could not attribute their keys).
  ``TenantAccessRole`` trusts only the identity pool, so nobody assumes it
  with ``AssumeRole``, the operator included, as in AWS.
- **The identity pool** (``GetId``, ``GetCredentialsForIdentity``,
  ``GetOpenIdToken``, unsigned as the SDKs send them, or signed by a key
  whose signature verifies): answered by
  :class:`local_stack.identity_pool.LocalIdentityPool`; the credentials it
  issues are recorded like AssumeRole's, with the role and the tags Cognito
  would set. Its other actions follow the rules below.
- **DynamoDB and DynamoDB Streams** signed with a recorded session: the
  questions DynamoDB asks IAM for the request
  (:mod:`local_stack.dynamodb_questions`), all of which the role's policies
  (and the session policy, if any) must allow; the first refusal answers as
  DynamoDB does: HTTP 400, ``AccessDeniedException``, "User: ... is not
  authorized to perform: ...". Requests that came through the gateway
  endpoint's listener carry ``aws:SourceVpce`` (:data:`SOURCE_VPCE_ENVIRON`).
- **Any other service** signed with a recorded session: evaluated on the
  resource the call names (:func:`resource_of`). A call whose resource the
  guard can't name is refused: judged on ``*``, a Deny naming the resource
  would not apply. KMS calls are judged on the key their ``KeyId`` names
  (an id or a key ARN; an alias is refused), with their encryption context
  as ``kms:EncryptionContext:<key>`` and ``kms:EncryptionContextKeys``
  (:mod:`local_stack.condition_keys`), and ``aws:SourceVpce`` when they came through the
  KMS interface endpoint's route of the endpoint listener.
- Requests signed with the **operator's** key
  (:data:`local_stack.state.OPERATOR_CREDENTIALS`, the one key without a
  session): the stack's own set-up, the ops tools and tests, your ``aws
  --endpoint-url`` commands and ``sam local`` containers given that pair. The
  operator is the emulated account's administrator and stands in for the
  Lambda service: its requests pass unchecked, except that it too can assume
  only the template's roles and only under their trust conditions; its
  principal counts as named by any trust policy. Any other key is unknown
  (``UnrecognizedClientException`` / ``InvalidClientTokenId``).
- **Unsigned** requests (neither an ``Authorization`` header nor a presigned
  query string) reach only the user pool's JWKS/OpenID configuration
  and Cognito's unauthenticated and token-authorized operations
  (:data:`local_stack.cognito.PUBLIC_ACTIONS`); Cognito's admin and
  management APIs need IAM credentials, and everything else (``/moto-api/``,
  unsigned STS federation) is refused.

What it knowingly does not model is listed in docs/local-stack.md. moto is
not thread-safe; the guard also serializes the requests it forwards.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from local_stack import cognito, iam, sigv4, wsgi
from local_stack.aws_answers import Answer, json_answer, json_error
from local_stack.condition_keys import kms_context, request_context
from local_stack.dynamodb_questions import TableKeys, authorize_dynamodb
from local_stack.identity_pool import IdentityPoolError, LocalIdentityPool
from local_stack.sessions import Session, Sessions, denial_message, signer_of
from local_stack.sigv4 import Credentials
from local_stack.sts import AssumeRoleRequest, assume_role_request, authorize_assume_role, xml_denial
from stack_model.roles import RoleDefinition
from stack_model.template import ACCOUNT_ID

log = logging.getLogger("local_stack.guard")

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_UNSIGNED_PATH = re.compile(r"^/[\w-]+_[0-9a-zA-Z]+/\.well-known/(jwks\.json|openid-configuration)$")
# Minting actions whose keys the guard could not attribute to a role.
_REFUSED_STS_ACTIONS = frozenset(
    {"AssumeRoleWithWebIdentity", "AssumeRoleWithSAML", "GetSessionToken", "GetFederationToken", "AssumeRoot"}
)
_STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
_STS_KEYS = ("AccessKeyId", "SecretAccessKey", "SessionToken")
_IDENTITY_POOL_TARGET = "AWSCognitoIdentityService."
# Set by the emulator's endpoint listener only (a WSGI key no client header can become):
# the DynamoDB gateway endpoint's id, or the KMS interface endpoint's.
SOURCE_VPCE_ENVIRON = "local_stack.source_vpce"
# SQS's batch actions have no IAM action of their own: each is authorized as its
# single-message action (SQS Developer Guide, "Amazon SQS batch actions").
SQS_BATCH_PERMISSIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
# What Cognito serves to anyone holding a login token (unsigned in AWS's SDKs).
IDENTITY_POOL_ACTIONS = frozenset({"GetId", "GetCredentialsForIdentity", "GetOpenIdToken"})
_DYNAMODB_DENIAL = "com.amazonaws.dynamodb.v20120810#AccessDeniedException"
_JSON_1_1 = "application/x-amz-json-1.1"  # the identity pool's protocol


# ---------------------------------------------------------------- other services
def resource_of(service: str, action: str, params: Mapping[str, Any], *, region: str) -> str:
    """The resource IAM authorizes a (non-DynamoDB) call on, for the services
    the stack's roles use: an SQS queue by its URL or name, a Cognito user pool
    by its id. Anything else is :class:`iam.NotUnderstood` (the guard denies
    it): evaluated against ``*``, a Deny naming a resource would not apply."""
    if service == "sqs":
        url, name = params.get("QueueUrl"), params.get("QueueName")
        if isinstance(url, str) and url:
            parts = urllib.parse.urlsplit(url).path.strip("/").split("/")
            if len(parts) == 2 and all(parts):  # /<account>/<queue>
                return f"arn:aws:sqs:{region}:{parts[0]}:{parts[1]}"
        elif isinstance(name, str) and name:
            return f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}"
        elif action == "ListQueues":
            return "*"
        raise iam.NotUnderstood(f"sqs:{action} without a queue")
    if service == "cognito-idp":
        pool = params.get("UserPoolId")
        if isinstance(pool, str) and pool:
            return f"arn:aws:cognito-idp:{region}:{ACCOUNT_ID}:userpool/{pool}"
        raise iam.NotUnderstood(f"cognito-idp:{action} without a user pool")
    if service == "kms":
        key = params.get("KeyId")
        if isinstance(key, str) and key.startswith(f"arn:aws:kms:{region}:") and ":key/" in key:
            return key
        if isinstance(key, str) and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", key):
            return f"arn:aws:kms:{region}:{ACCOUNT_ID}:key/{key}"
        # An alias (KMS authorizes the key it names, which the guard does not
        # look up) or a call without a key.
        raise iam.NotUnderstood(f"kms:{action} without a key id or key ARN")
    raise iam.NotUnderstood(f"resources of {service}")


def key_policy_decision(policy: Mapping[str, Any] | None, session: Session, request: iam.Request) -> iam.Decision:
    """What a key's policy adds to an allowed call: its Denies (a ``Principal``
    ``"*"`` statement conditioned on ``aws:PrincipalArn``, say). Its Allows are
    the account's delegation to IAM, which already allowed the call."""
    if policy is None:
        return iam.Decision.ALLOW
    denies = [s for s in policy.get("Statement", []) if isinstance(s, Mapping) and s.get("Effect") == "Deny"]
    asking = iam.Request(request.action, request.resource, request.context, principals=(session.role.arn, session.arn))
    if iam.evaluate([{"Statement": denies}], asking, trust=True) is iam.Decision.EXPLICIT_DENY:
        return iam.Decision.EXPLICIT_DENY
    return iam.Decision.ALLOW


# ---------------------------------------------------------------- the middleware
class Guard:
    """WSGI middleware: authorize, then forward to moto (one request at a time)."""

    def __init__(
        self,
        app: WsgiApp,
        roles: Mapping[str, RoleDefinition],
        tables: Mapping[str, TableKeys],
        sessions: Sessions | None = None,
        identity_pool: LocalIdentityPool | None = None,
        *,
        key_policies: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._app = app
        self.roles = roles
        self.tables = tables
        self.sessions = sessions or Sessions()
        self.identity_pool = identity_pool
        # The template's KMS key policies, by key ARN: their Denies apply to
        # every session's calls on the key, whatever the role's policies allow.
        self.key_policies: Mapping[str, Mapping[str, Any]] = key_policies or {}
        self._lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        body = _read_body(environ)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        response: Answer | None
        identity_pool_action = (
            target.removeprefix(_IDENTITY_POOL_TARGET) if target.startswith(_IDENTITY_POOL_TARGET) else ""
        )
        if sigv4.is_signed(environ):
            response = self._signed(environ, body, target, identity_pool_action)
        elif identity_pool_action in IDENTITY_POOL_ACTIONS:
            response = self._identity_pool(identity_pool_action, body)
        else:
            response = self._unsigned(environ, body, target)
        status, headers, data = response if response is not None else self._forward(environ, body)
        start_response(status, headers)
        return [data]

    def _signed(self, environ: Environ, body: bytes, target: str, identity_pool_action: str) -> Answer | None:
        """A signed request: its signature verified against the key's secret,
        then judged as its signer's (``None``: forward it)."""
        try:
            signed = sigv4.verify(environ, body, self.sessions.credentials)
            if signed.presigned:
                # moto dispatches and attributes requests by this header only.
                environ["HTTP_AUTHORIZATION"] = signed.authorization()
            signer = signer_of(environ["HTTP_AUTHORIZATION"])
            if signer is None or signer.access_key not in (None, signed.access_key):
                # moto would act for another key than the one that signed.
                raise sigv4.SignatureError(sigv4.Failure.INCOMPLETE, "The Authorization header names two keys.")
        except sigv4.SignatureError as exc:
            log.warning("refused a signature (%s): %s", exc.failure.value, exc.message)
            return sigv4.refusal(
                exc, service=_claimed_service(environ), target=target, content_type=environ.get("CONTENT_TYPE", "")
            )
        if identity_pool_action in IDENTITY_POOL_ACTIONS:
            return self._identity_pool(identity_pool_action, body)
        session = self.sessions.get(signed.access_key)
        return self._authorize(environ, body, session, region=signer.region, service=signer.service, target=target)

    def _identity_pool(self, action: str, body: bytes) -> Answer:
        """Cognito's answer (JSON 1.1); issued credentials are recorded with
        the pool's role and the tags Cognito would set."""
        try:
            params = json.loads(body or b"{}")
            if not isinstance(params, dict):
                raise IdentityPoolError("InvalidParameterException", "The request body is not a JSON object.")
            if self.identity_pool is None:
                raise IdentityPoolError("ResourceNotFoundException", "No identity pool is provisioned.")
            answer, issued = self.identity_pool.call(action, params)
        except ValueError:
            code, message = "SerializationException", "The request body is not JSON."
        except IdentityPoolError as exc:
            code, message = exc.code, exc.message
        else:
            if issued is not None:
                self.sessions.add(
                    Session(issued.access_key_id, issued.role, issued.session_name, dict(issued.tags)),
                    Credentials(issued.access_key_id, issued.secret_key, issued.session_token),
                )
            return json_answer(answer, content_type=_JSON_1_1)
        log.warning("identity pool refused %s: %s", action, message)
        return json_error(code, message, content_type=_JSON_1_1)

    def _forward(self, environ: Environ, body: bytes) -> Answer:
        with self._lock:
            return wsgi.call(self._app, environ, body)

    def _unsigned(self, environ: Environ, body: bytes, target: str) -> Answer | None:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") == "GET" and _UNSIGNED_PATH.match(path):
            return None
        service, _, action = target.partition(".")
        if service == "AWSCognitoIdentityProviderService":
            if action in cognito.PUBLIC_ACTIONS:
                return None
            # Admin and management APIs need IAM credentials (the operator's here).
            return json_error("MissingAuthenticationTokenException", "Missing Authentication Token")
        sts_action = "" if target else _query_params(environ, body).get("Action", "")
        if sts_action:
            # STS's unsigned federation (AssumeRoleWithWebIdentity, -WithSAML), in STS's own XML.
            return xml_denial(denial_message("anonymous", f"sts:{sts_action}", "*", None))
        return json_error("AccessDeniedException", "Unsigned requests are not accepted here.", status="403 Forbidden")

    def _authorize(
        self, environ: Environ, body: bytes, session: Session | None, *, region: str, service: str, target: str
    ) -> Answer | None:
        if service == "sts":
            return self._sts(environ, body, session)
        if session is None:
            return None  # the operator
        if service == "dynamodb":
            operation = target.split(".", 1)[1] if target.startswith(("DynamoDB_", "DynamoDBStreams_")) else target
            try:
                payload = json.loads(body or b"{}")
            except ValueError:
                payload = None
            message = (
                authorize_dynamodb(
                    session,
                    operation,
                    payload,
                    region=region,
                    tables=self.tables,
                    source_vpce=environ.get(SOURCE_VPCE_ENVIRON),
                )
                if isinstance(payload, dict)
                else denial_message(session.arn, f"dynamodb:{operation}", "*", None)
            )
            if message is not None:
                log.warning("denied: %s", message)
                return json_error(_DYNAMODB_DENIAL, message)
            return None
        params = _request_params(environ, body, target)
        action = target.split(".", 1)[1] if "." in target else str(params.get("Action", ""))
        if service == "sqs":
            action = SQS_BATCH_PERMISSIONS.get(action, action)
        try:
            resource = resource_of(service, action, params, region=region)
            service_context = kms_context(params) if service == "kms" else {}
            context = request_context(session, environ.get(SOURCE_VPCE_ENVIRON), service_context)
        except iam.NotUnderstood as exc:
            log.warning("refused %s:%s for %s: %s", service, action, session.arn, exc)
            resource, decision = "*", None
        else:
            request = iam.Request(f"{service}:{action}", resource, context)
            decision = session.decide(request)
            if decision is iam.Decision.ALLOW and service == "kms":
                decision = key_policy_decision(self.key_policies.get(resource), session, request)
            if decision is iam.Decision.ALLOW:
                return None
        message = denial_message(session.arn, f"{service}:{action}", resource, decision)
        log.warning("denied: %s", message)
        return json_error("AccessDeniedException", message) if target else xml_denial(message)

    def _sts(self, environ: Environ, body: bytes, caller: Session | None) -> Answer | None:
        params = _query_params(environ, body)
        action = params.get("Action", "")
        caller_arn = caller.arn if caller is not None else f"arn:aws:iam::{ACCOUNT_ID}:root"
        if action in _REFUSED_STS_ACTIONS:
            return xml_denial(denial_message(caller_arn, f"sts:{action}", "*", None))
        if action != "AssumeRole":
            return None
        request = assume_role_request(params, caller_arn)
        if not isinstance(request, AssumeRoleRequest):
            return request
        message = authorize_assume_role(caller, request, self.roles)
        if message is not None:
            log.warning("denied: %s", message)
            return xml_denial(message)
        response = self._forward(environ, body)
        if response[0].startswith("200"):
            issued = ET.fromstring(response[2]).find(f".//{_STS_NS}Credentials")  # noqa: S314 - moto's own XML
            keys = [issued.findtext(f"{_STS_NS}{name}") if issued is not None else None for name in _STS_KEYS]
            role = next(role for role in self.roles.values() if role.arn == request.role_arn)
            access_key, secret, token = keys
            if not access_key or not secret or not token:
                return xml_denial("The emulator returned no credentials.")
            self.sessions.add(
                Session(access_key, role, request.session_name, dict(request.tags), request.session_policy),
                Credentials(access_key, secret, token),
            )
        return response


def _read_body(environ: Environ) -> bytes:
    """The whole body: ``Content-Length`` bytes, or a chunked body to its end
    (werkzeug decodes the chunks and marks the input terminated)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > 0:
        return bytes(environ["wsgi.input"].read(length))
    if environ.get("wsgi.input_terminated"):
        return bytes(environ["wsgi.input"].read())
    return b""


def _claimed_service(environ: Environ) -> str:
    """The service a request's credential scope names (how to word a refusal
    of its signature), as moto would read it; "" when there is none."""
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if authorization:
        signer = signer_of(authorization)
        return signer.service if signer is not None else ""
    credential = dict(sigv4.query_pairs(environ)).get("X-Amz-Credential", "")
    parts = credential.split("/")
    return parts[3].lower() if len(parts) == 5 else ""


def _request_params(environ: Environ, body: bytes, target: str) -> dict[str, Any]:
    """A JSON-protocol body (calls with an X-Amz-Target), else the query parameters."""
    if target:
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            return {}
        return payload if isinstance(payload, dict) else {}
    return dict(_query_params(environ, body))


def _query_params(environ: Environ, body: bytes) -> dict[str, str]:
    params = {key: values[-1] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        params.update({key: values[-1] for key, values in parse_qs(body.decode("utf-8", "replace")).items()})
    return params
