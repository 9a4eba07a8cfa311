"""The IAM guard in front of the emulator: what AWS would refuse, refused.

moto answers every request as if IAM allowed it, whoever signed it. The
guard is a WSGI middleware in front of moto's server: it verifies each signed
request's SigV4 signature against the secret the emulator issued for its key
(:mod:`local_stack.iam.sigv4`, the keys in :mod:`local_stack.iam.sessions`; an unknown
key, a session token that is not the key's, a timestamp too far from the clock
or a wrong signature are refused as the service refuses them), then routes it
by service and evaluates the template's policies for it with
:mod:`local_stack.iam.policy_evaluation`. A role's policies are its inline ones and its AWS
managed policies (see :mod:`stack_model.roles`):

- **STS AssumeRole** (any caller): validated and authorized as STS does
  (:mod:`local_stack.iam.sts`: the target must be a role of the template, its
  trust policy and the caller's own policies must allow it). When moto then
  issues the credentials, the guard records their access key id, secret and
  session token with the role, the session name and the session tags: that
  is how ``${aws:PrincipalTag/...}`` gets its value later. Other
  credential-minting STS actions are refused (the guard could not attribute
  their keys). ``TenantAccessRole`` trusts only the identity pool, so nobody
  assumes it with ``AssumeRole``, the operator included, as in AWS.
- **The identity pool** (``GetId``, ``GetCredentialsForIdentity``,
  ``GetOpenIdToken``, unsigned as the SDKs send them, or signed by a key
  whose signature verifies): answered by
  :class:`local_stack.cognito.identity_pool.LocalIdentityPool`; the credentials it
  issues are recorded like AssumeRole's, with the role and the tags Cognito
  would set. Its other actions follow the rules below.
- **DynamoDB and DynamoDB Streams** signed with a recorded session: the
  questions DynamoDB asks IAM for the request
  (:mod:`local_stack.iam.dynamodb_authorization`), all of which the role's policies
  (and the session policy, if any) must allow; the first refusal answers as
  DynamoDB does: HTTP 400, ``AccessDeniedException``, "User: ... is not
  authorized to perform: ...". Requests that came through the gateway
  endpoint's listener carry ``aws:SourceVpce`` (:data:`SOURCE_VPCE_ENVIRON`);
  a question on a tagged table (or its index) carries its tags as
  ``aws:ResourceTag/<key>``, read when it is asked (``resource_tags``).
  Then, for a data request on a table encrypted with a customer managed key
  (``table_key``), DynamoDB's use of the key for the caller: its policy's
  answer, and the key's state, whoever calls, the operator included
  (:mod:`local_stack.iam.kms_via_dynamodb`).
- **Any other service** signed with a recorded session: the one question
  its call asks (:mod:`local_stack.iam.service_authorization`: the resource it names,
  for KMS the key its ``KeyId`` names and its encryption context), which the
  session's policies must allow. A call whose resource the guard can't name
  is refused: judged on ``*``, a Deny naming the resource would not apply.
  A KMS key's policy then adds its Denies (:func:`key_policy_decision`).
- Requests signed with the **operator's** key
  (:data:`local_stack.running_stack.OPERATOR_CREDENTIALS`, the one key without a
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
  (:data:`local_stack.cognito.user_pool.PUBLIC_ACTIONS`); Cognito's admin and
  management APIs need IAM credentials, and everything else (``/moto-api/``,
  unsigned STS federation) is refused.

Every condition key a request carries is computed in
:mod:`local_stack.iam.condition_keys` and evaluated by :mod:`local_stack.iam.policy_evaluation`;
what the guard reads of a request is :mod:`local_stack.iam.protocol_requests`, its own
answers are worded by :mod:`local_stack.iam.protocol_answers`. What it knowingly does
not model is listed in docs/local-stack.md. moto is not thread-safe; the
guard also serializes the requests it forwards.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from local_stack import wsgi
from local_stack.cognito import user_pool as cognito
from local_stack.cognito.identity_pool import IdentityPoolError, LocalIdentityPool
from local_stack.iam import policy_evaluation as iam
from local_stack.iam import protocol_requests as aws_requests
from local_stack.iam import sigv4, sts
from local_stack.iam.dynamodb_authorization import ResourceTags, TableKeys, authorize_dynamodb
from local_stack.iam.kms_via_dynamodb import TableKeyOf, table_key_refusal, tables_of
from local_stack.iam.protocol_answers import Answer, json_answer, json_error
from local_stack.iam.protocol_requests import Environ
from local_stack.iam.service_authorization import iam_action, service_question
from local_stack.iam.sessions import Session, Sessions, denial_message, signer_of
from local_stack.iam.sigv4 import Credentials
from stack_model.roles import RoleDefinition

log = logging.getLogger("local_stack.guard")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_UNSIGNED_PATH = re.compile(r"^/[\w-]+_[0-9a-zA-Z]+/\.well-known/(jwks\.json|openid-configuration)$")
# Set by the emulator's endpoint listener only (a WSGI key no client header can become):
# the DynamoDB gateway endpoint's id, or the KMS interface endpoint's.
SOURCE_VPCE_ENVIRON = "local_stack.source_vpce"
# What Cognito serves to anyone holding a login token (unsigned in AWS's SDKs).
IDENTITY_POOL_ACTIONS = frozenset({"GetId", "GetCredentialsForIdentity", "GetOpenIdToken"})
_DYNAMODB_DENIAL = "com.amazonaws.dynamodb.v20120810#AccessDeniedException"
_JSON_1_1 = "application/x-amz-json-1.1"  # the identity pool's protocol


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
        resource_tags: ResourceTags | None = None,
        table_key: TableKeyOf | None = None,
    ) -> None:
        self._app = app
        self.roles = roles
        # Every table the guard reads keys of (a dedicated table is added when it is made).
        self.tables = tables
        # A resource's tags as they are when a question is asked (aws:ResourceTag).
        self.resource_tags = resource_tags
        # A table's KMS key and its state as they are when a data request comes.
        self.table_key = table_key
        self.sessions = sessions or Sessions()
        self.identity_pool = identity_pool
        # The template's KMS key policies, by key ARN: their Denies apply to
        # every session's calls on the key, whatever the role's policies allow.
        self.key_policies: Mapping[str, Mapping[str, Any]] = key_policies or {}
        self._lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        body = aws_requests.read_body(environ)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        pool_action = aws_requests.identity_pool_action(target)
        response: Answer | None
        if sigv4.is_signed(environ):
            response = self._signed(environ, body, target, pool_action)
        elif pool_action in IDENTITY_POOL_ACTIONS:
            response = self._identity_pool(pool_action, body)
        else:
            response = self._unsigned(environ, body, target)
        status, headers, data = response if response is not None else self._forward(environ, body)
        start_response(status, headers)
        return [data]

    def _signed(self, environ: Environ, body: bytes, target: str, pool_action: str) -> Answer | None:
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
            claimed, content_type = aws_requests.claimed_service(environ), environ.get("CONTENT_TYPE", "")
            return sigv4.refusal(exc, service=claimed, target=target, content_type=content_type)
        if pool_action in IDENTITY_POOL_ACTIONS:
            return self._identity_pool(pool_action, body)
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
        sts_action = "" if target else aws_requests.query_params(environ, body).get("Action", "")
        if sts_action:
            # STS's unsigned federation (AssumeRoleWithWebIdentity, -WithSAML), in STS's own XML.
            return sts.xml_denial(denial_message("anonymous", f"sts:{sts_action}", "*", None))
        return json_error("AccessDeniedException", "Unsigned requests are not accepted here.", status="403 Forbidden")

    def _authorize(
        self, environ: Environ, body: bytes, session: Session | None, *, region: str, service: str, target: str
    ) -> Answer | None:
        """A signed request's decision: ``None`` (forward it) or the refusal."""
        if service == "sts":
            return self._sts(environ, body, session)
        source_vpce = environ.get(SOURCE_VPCE_ENVIRON)
        if service == "dynamodb":
            return self._dynamodb(session, aws_requests.dynamodb_operation(target), body, region, source_vpce)
        if session is None:
            return None  # the operator
        params = aws_requests.request_params(environ, body, target)
        action = iam_action(service, aws_requests.action_of(target, params))
        try:
            request = service_question(session, service, action, params, region=region, source_vpce=source_vpce)
        except iam.NotUnderstood as exc:
            log.warning("refused %s:%s for %s: %s", service, action, session.arn, exc)
            resource, decision = "*", None
        else:
            resource, decision = request.resource, session.decide(request)
            if decision is iam.Decision.ALLOW and service == "kms":
                decision = key_policy_decision(self.key_policies.get(resource), session, request)
            if decision is iam.Decision.ALLOW:
                return None
        message = denial_message(session.arn, f"{service}:{action}", resource, decision)
        log.warning("denied: %s", message)
        return json_error("AccessDeniedException", message) if target else sts.xml_denial(message)

    def _dynamodb(
        self, session: Session | None, operation: str, body: bytes, region: str, source_vpce: str | None
    ) -> Answer | None:
        """IAM's questions (a role session's), then DynamoDB's use of the key of
        each table the request reads or writes (anyone's)."""
        payload = aws_requests.json_object(body)
        if session is not None:
            message = (
                authorize_dynamodb(
                    session,
                    operation,
                    payload,
                    region=region,
                    tables=self.tables,
                    source_vpce=source_vpce,
                    resource_tags=self.resource_tags,
                )
                if payload is not None
                else denial_message(session.arn, f"dynamodb:{operation}", "*", None)
            )
            if message is not None:
                log.warning("denied: %s", message)
                return json_error(_DYNAMODB_DENIAL, message)
        if payload is None or self.table_key is None:
            return None
        refusal = table_key_refusal(
            session,
            tables_of(operation, payload, region=region, tables=self.tables),
            region=region,
            table_key=self.table_key,
            key_policies=self.key_policies,
        )
        if refusal is None:
            return None
        log.warning("refused: %s", refusal.message)
        return json_error(refusal.code, refusal.message)

    def _sts(self, environ: Environ, body: bytes, caller: Session | None) -> Answer | None:
        params = aws_requests.query_params(environ, body)
        action = params.get("Action", "")
        if action in sts.REFUSED_ACTIONS:
            return sts.xml_denial(denial_message(sts.caller_arn(caller), f"sts:{action}", "*", None))
        if action != "AssumeRole":
            return None
        request = sts.assume_role_request(params, caller)
        if not isinstance(request, sts.AssumeRoleRequest):
            return request
        message = sts.authorize_assume_role(caller, request, self.roles)
        if message is not None:
            log.warning("denied: %s", message)
            return sts.xml_denial(message)
        response = self._forward(environ, body)
        if response[0].startswith("200"):
            issued = sts.issued_credentials(response[2])
            if issued is None:
                return sts.xml_denial("The emulator returned no credentials.")
            role = next(role for role in self.roles.values() if role.arn == request.role_arn)
            session = Session(
                issued.access_key_id, role, request.session_name, dict(request.tags), request.session_policy
            )
            self.sessions.add(session, issued)
        return response
