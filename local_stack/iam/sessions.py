"""Who signed a request, and the credentials the emulator issued: the
guard's registry of request signers.

:func:`signer_of` reads the ``Authorization`` header exactly as moto reads it,
so both always agree on the caller and the service. A :class:`Session` is a
set of credentials the emulator's STS or identity pool issued for a role of
the template, with its session name and tags (what ``${aws:PrincipalTag/...}``
is later evaluated with, :func:`local_stack.iam.condition_keys.principal_context`).
:class:`Sessions` is the one place that knows every key the emulator accepts
and its secret and session token (:class:`local_stack.iam.sigv4.Credentials`):
the operator's fixed pair (:data:`local_stack.running_stack.OPERATOR_CREDENTIALS`)
and each role session's, as AssumeRole or the identity pool issued them. The
guard verifies every signed request against it (:mod:`local_stack.iam.sigv4`); a
key it does not hold is refused, a verified key without a session is the
operator.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.core.responses import BaseResponse
from moto.moto_server.werkzeug_app import SIGNING_ALIASES

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.sigv4 import Credentials
from stack_model.roles import RoleDefinition
from stack_model.template import ACCOUNT_ID


@dataclass(frozen=True)
class Signer:
    """Who signed a request, and for which region and service, read from its
    ``Authorization`` header exactly as moto reads it: the access key with
    moto's own expression (``BaseResponse.access_key_regex``, the key moto
    attributes the request to), the region and service from the first
    comma-separated part's credential scope, as moto's dispatcher picks the
    backend (``DomainDispatcherApplication.infer_service_region_host``).
    ``access_key`` is ``None`` when moto finds none (it then acts as its
    default account, i.e. the operator here)."""

    access_key: str | None
    region: str
    service: str


def signer_of(authorization: str) -> Signer | None:
    """``None`` when the header names no service moto could dispatch by."""
    match = BaseResponse.access_key_regex.search(authorization)
    try:
        scope = authorization.split(",", maxsplit=1)[0].split()[1]
        _, _, region, service, _ = scope.split("/")
    except (IndexError, ValueError):
        return None
    service = SIGNING_ALIASES.get(service.lower(), service).lower()
    return Signer(match.group("access_key") if match else None, region, service)


@dataclass(frozen=True)
class Session:
    """Credentials the emulator's STS issued for a role of the template."""

    access_key_id: str
    role: RoleDefinition
    session_name: str
    tags: Mapping[str, str] = field(default_factory=dict)
    session_policy: Mapping[str, Any] | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{self.role.name}/{self.session_name}"

    def decide(self, request: iam.Request) -> iam.Decision:
        policy_sets: list[list[Mapping[str, Any]]] = [list(self.role.policies())]
        if self.session_policy is not None:
            policy_sets.append([self.session_policy])
        return iam.evaluate_all(policy_sets, request)


class Sessions:
    """Access key id -> credentials (every key the emulator issued) and, for a
    role session (an AssumeRole the guard let through, the identity pool's
    credentials), the session. ``operator``: the one key without a session."""

    def __init__(self, operator: Credentials | None = None) -> None:
        self._by_key: dict[str, Session] = {}
        self._credentials: dict[str, Credentials] = {}
        self._lock = threading.Lock()
        if operator is not None:
            self._credentials[operator.access_key_id] = operator

    def add(self, session: Session, credentials: Credentials) -> None:
        if credentials.access_key_id != session.access_key_id or credentials.session_token is None:
            raise ValueError("a role session's credentials are its own key's, with a session token")
        with self._lock:
            if credentials.access_key_id in self._credentials and credentials.access_key_id not in self._by_key:
                raise ValueError("the operator's key can't become a role session's")
            self._by_key[session.access_key_id] = session
            self._credentials[credentials.access_key_id] = credentials

    def credentials(self, access_key_id: str) -> Credentials | None:
        """The secret and session token of a key the emulator issued (``None``: unknown)."""
        with self._lock:
            return self._credentials.get(access_key_id)

    def get(self, access_key_id: str | None) -> Session | None:
        if access_key_id is None:
            return None
        with self._lock:
            return self._by_key.get(access_key_id)


def denial_message(
    principal: str, action: str, resource: str, decision: iam.Decision | None, *, trust: bool = False
) -> str:
    """AWS's wording: the reason names the identity-based policy; a refused trust
    policy gets no reason, as STS answers it."""
    message = f"User: {principal} is not authorized to perform: {action} on resource: {resource}"
    if trust:
        return message
    if decision is iam.Decision.EXPLICIT_DENY:
        return f"{message} with an explicit deny in an identity-based policy"
    return f"{message} because no identity-based policy allows the {action} action"
