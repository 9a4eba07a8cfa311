"""A deployed stack, found from its CloudFormation outputs, for tests over HTTPS.

Set ``AWS_SAM_STACK_NAME`` (and AWS credentials, e.g. ``AWS_PROFILE``) to run
them: ``make integration AWS_SAM_STACK_NAME=<stack>``. Without it every test
here is skipped and nothing calls AWS. Test users are created in the stack's
user pool with ``custom:tenant_id`` through the Cognito admin APIs, signed in
with ADMIN_USER_PASSWORD_AUTH, and deleted at the end of the session.

The root conftest replaces AWS_* variables with fake credentials for every
test, so the real ones are captured here, at import, before any test runs.
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from ops.users import UserPool, ensure_user, id_token
from tests.functional.api_harness import ApiResponse

STACK_NAME_VARIABLE = "AWS_SAM_STACK_NAME"
REAL_AWS_ENVIRONMENT = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
HTTP_TIMEOUT_S = 30


@dataclass(frozen=True)
class Caller:
    tenant_id: str
    username: str
    token: str


@dataclass
class DeployedStack:
    api_url: str  # stage included, no trailing slash
    pool: UserPool
    session: boto3.Session
    outputs: dict[str, str]
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    usernames: list[str] = field(default_factory=list)

    def caller(self, tenant_id: str, name: str, *, admin: bool = False) -> Caller:
        """A new user of ``tenant_id`` (deleted at the end of the session)."""
        username = f"it-{self.run_id}-{tenant_id}-{name}"
        ensure_user(self.pool, username, tenant_id, admin=admin)
        self.usernames.append(username)
        return Caller(tenant_id, username, id_token(self.pool, username))

    def request(
        self,
        method: str,
        path: str,
        caller: Caller | None,
        *,
        body: Any = None,
        raw_body: str | None = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        url = self.api_url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
        request = urllib.request.Request(url, method=method, data=data.encode() if data is not None else None)  # noqa: S310 - https URL from the stack outputs
        request.add_header("Content-Type", "application/json")
        if caller is not None:
            request.add_header("Authorization", f"Bearer {caller.token}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:  # noqa: S310
                status, response_headers, payload = response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            status, response_headers, payload = error.code, dict(error.headers), error.read()
        return ApiResponse(
            status=status,
            headers={name.lower(): value for name, value in response_headers.items()},
            body=json.loads(payload) if payload else None,
            request_id=response_headers.get("x-amzn-RequestId", ""),
        )

    def delete_users(self) -> None:
        for username in self.usernames:
            self.pool.cognito.admin_delete_user(UserPoolId=self.pool.pool_id, Username=username)
        self.usernames.clear()


def _session() -> boto3.Session:
    env = REAL_AWS_ENVIRONMENT
    return boto3.Session(
        profile_name=env.get("AWS_PROFILE"),
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=env.get("AWS_SESSION_TOKEN"),
        region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
    )


@pytest.fixture(scope="session")
def deployed() -> Iterator[DeployedStack]:
    stack_name = REAL_AWS_ENVIRONMENT.get(STACK_NAME_VARIABLE)
    if not stack_name:
        hint = f"make integration {STACK_NAME_VARIABLE}=<stack>"
        pytest.skip(f"{STACK_NAME_VARIABLE} is not set: no deployed stack to test ({hint})")
    session = _session()
    (stack,) = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
    pool = UserPool(
        cognito=session.client("cognito-idp"),
        pool_id=outputs["UserPoolId"],
        client_id=outputs["UserPoolClientId"],
    )
    deployed_stack = DeployedStack(api_url=outputs["ApiUrl"].rstrip("/"), pool=pool, session=session, outputs=outputs)
    try:
        yield deployed_stack
    finally:
        deployed_stack.delete_users()
