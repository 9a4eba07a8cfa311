"""Both engines on a :class:`~tests.oracle.cases.Case`: the guard, through the
path it takes for every DynamoDB request of a role session
(:func:`local_stack.iam.guard.authorize_dynamodb`: the body's questions, then the
role's policies), and iam-simulate, one Node process for a whole batch.

Each answers with an :class:`Outcome`: allowed, or the first question refused
(its action, its resource, and whether an explicit deny refused it), which is
what the guard's AccessDeniedException names.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from local_stack.iam.dynamodb_authorization import TableKeys, authorize_dynamodb
from local_stack.iam.sessions import Session
from stack_model.roles import RoleDefinition
from tests.oracle.cases import DEDICATED_TAGS, SOURCE_VPCE, Case, Question, table_arn
from tests.oracle.policies import REGION

ORACLE_DIR = Path(__file__).resolve().parent
INSTALL_HINT = "the IAM oracle is not installed: run `make oracle` (npm ci in tests/oracle)"
_DENIAL = re.compile(
    r"^User: (?P<principal>\S+) is not authorized to perform: (?P<action>\S+) on resource: (?P<resource>\S+)"
    r"(?P<reason> with an explicit deny in an identity-based policy"
    r"| because no identity-based policy allows the \S+ action)$"
)


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    action: str = ""
    resource: str = ""
    explicit: bool = False

    def __str__(self) -> str:
        if self.allowed:
            return "allowed"
        return f"{'explicit' if self.explicit else 'implicit'} deny of {self.action} on {self.resource}"


# ---------------------------------------------------------------- the guard
def table_tags(resource: str) -> dict[str, str]:
    """What the guard reads a table's tags from (moto's table, in the emulator):
    a table ARN's own tags, and nothing for any other ARN (the guard must find
    an index's table itself)."""
    return next((dict(tags) for table, tags in DEDICATED_TAGS.items() if table_arn(table) == resource), {})


def guard_outcome(case: Case, roles: Mapping[str, RoleDefinition], tables: Mapping[str, TableKeys]) -> Outcome:
    role = roles[case.role.name]
    session = Session("ASIAORACLE", role, case.session_name, dict(case.tags))
    # The route: through the emulator's gateway-endpoint listener, the guard is told the endpoint's id.
    message = authorize_dynamodb(
        session,
        case.call.operation,
        case.call.body,
        region=REGION,
        tables=tables,
        source_vpce=case.route.get(SOURCE_VPCE),
        resource_tags=table_tags,
    )
    if message is None:
        return Outcome(allowed=True)
    match = _DENIAL.match(message)
    if match is None or match.group("principal") != case.principal:
        raise AssertionError(f"the guard's denial is not worded as AWS words it: {message}")
    explicit = match.group("reason").startswith(" with an explicit deny")
    return Outcome(False, match.group("action"), match.group("resource"), explicit)


# ---------------------------------------------------------------- iam-simulate
@dataclass(frozen=True)
class Verdict:
    result: str  # "Allowed", "ExplicitlyDenied" or "ImplicitlyDenied"
    ignored: tuple[str, ...] = ()


class OracleError(RuntimeError):
    """iam-simulate could not judge a question (an unknown action, a resource
    the action has no type for, an invalid policy)."""


def question_key(case: Case, question: Question) -> str:
    return json.dumps([case.role.name, question.action, question.resource, case.context(question)], sort_keys=True)


def simulate(asked: Sequence[tuple[Case, Question]]) -> dict[str, Verdict]:
    """iam-simulate's verdict on every (case, question), by :func:`question_key`; each
    distinct question is sent once."""
    node = shutil.which("node")
    if node is None or not (ORACLE_DIR / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir():
        raise RuntimeError(INSTALL_HINT)
    unique: dict[str, tuple[Case, Question]] = {}
    for case, question in asked:
        unique.setdefault(question_key(case, question), (case, question))
    policies = {case.role.name: list(case.role.policies) for case, _ in unique.values()}
    payload = {
        "policies": policies,
        "questions": [
            {
                "policies": case.role.name,
                "principal": case.principal,
                "action": question.action,
                "resource": question.resource,
                "context": case.context(question),
            }
            for case, question in unique.values()
        ],
    }
    completed = subprocess.run(  # noqa: S603 - our own script, our own input
        [node, str(ORACLE_DIR / "simulate.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=ORACLE_DIR,
        check=False,
        timeout=240,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"iam-simulate failed: {completed.stderr[-2000:]}")
    answers = json.loads(completed.stdout)
    verdicts: dict[str, Verdict] = {}
    for key, answer in zip(unique, answers, strict=True):
        if "error" in answer:
            case, question = unique[key]
            raise OracleError(f"{question.action} on {question.resource} for {case.role.name}: {answer['error']}")
        verdicts[key] = Verdict(answer["result"], tuple(answer["ignored"]))
    return verdicts


def oracle_outcome(case: Case, questions: Sequence[Question], verdicts: Mapping[str, Verdict]) -> Outcome:
    for question in questions:
        verdict = verdicts[question_key(case, question)]
        if verdict.result != "Allowed":
            return Outcome(False, question.action, question.resource, verdict.result == "ExplicitlyDenied")
    return Outcome(allowed=True)
