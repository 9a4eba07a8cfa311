"""The guard's IAM decisions against an independent engine, iam-simulate.

Thousands of DynamoDB requests (:mod:`tests.oracle.cases`) built from the
template's SAM-translated roles: every role, the item, batch, transaction and
index calls the code makes and the calls it must never make, keys of tenants
``1``, ``10``, ``a``, ``a-b`` of every kind, session tags right, wrong and
wild, ``aws:SourceVpce`` right, wrong and absent. The guard judges each from
its body alone (:func:`local_stack.iam.guard.authorize_dynamodb`); iam-simulate
judges the questions AWS asks for it. Their verdicts must be the same, down to
which question is refused and whether by an explicit deny. The dedicated
tenants' tables are among the tables (tagged ``TenantId``: the guard reads the
tags as the emulator reads moto's, iam-simulate is given them as AWS's
``aws:ResourceTag``). The one difference
the guard keeps on purpose (the partition keys of a Query's start key, see
docs/local-stack.md) has its own test: there the guard is only ever stricter,
and the oracle agrees with it on the questions the guard asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from local_stack.iam.dynamodb_authorization import TableKeys
from stack_model import dedicated
from stack_model.roles import RoleDefinition, roles_from_template
from stack_model.template import table_definition
from tests.oracle import cases as generator
from tests.oracle.engines import Outcome, Verdict, guard_outcome, oracle_outcome, question_key, simulate
from tests.oracle.policies import OracleRole, condition_values, local_values, template_roles

MIN_REQUESTS = 5_000
SHOWN = 20


@dataclass(frozen=True)
class Run:
    cases: list[generator.Case]
    verdicts: Mapping[str, Verdict]
    guard_roles: Mapping[str, RoleDefinition]
    tables: Mapping[str, TableKeys]

    def guard(self, case: generator.Case) -> Outcome:
        return guard_outcome(case, self.guard_roles, self.tables)

    def oracle(self, case: generator.Case, *, as_the_guard_asks: bool = False) -> Outcome:
        questions = case.call.guard_questions if as_the_guard_asks else case.call.questions
        assert questions is not None
        return oracle_outcome(case, questions, self.verdicts)


def _tables() -> dict[str, TableKeys]:
    """The tables' keys as the emulator gives them to the guard: the pool's, and
    each dedicated table's (its template read for the tenant its name names)."""
    definitions = [table_definition(local_values())]
    for name in generator.DEDICATED_TAGS:
        tenant = name.rsplit(dedicated.TABLE_INFIX, 1)[1]
        definitions.append(dedicated.table_definition(dedicated.dedicated_values(tenant, local_values())))

    def hash_key(schema: list[dict[str, str]]) -> str:
        return next(part["AttributeName"] for part in schema if part["KeyType"] == "HASH")

    found = {}
    for definition in definitions:
        indexes = {index["IndexName"]: hash_key(index["KeySchema"]) for index in definition["GlobalSecondaryIndexes"]}
        name = definition["TableName"]
        found[name] = TableKeys(name, hash_key(definition["KeySchema"]), indexes)
    assert set(found) == {definitions[0]["TableName"], *generator.DEDICATED_TAGS}
    return found


@pytest.fixture(scope="module")
def run() -> Run:
    roles: dict[str, OracleRole] = template_roles()
    values = local_values()
    stream_arn = str(values.attributes["SupportTicketTable.StreamArn"])
    routes = generator.routes(condition_values(roles))
    all_cases = generator.cases(roles, routes, stream_arn)
    asked = [(case, question) for case in all_cases for question in case.call.questions]
    asked += [(case, question) for case in all_cases for question in case.call.guard_questions or ()]
    return Run(all_cases, simulate(asked), roles_from_template(values), _tables())


def _report(disagreements: list[str]) -> str:
    shown = "\n".join(disagreements[:SHOWN])
    return f"{len(disagreements)} disagreements, the first {min(SHOWN, len(disagreements))}:\n{shown}"


def _describe(case: generator.Case, guard: Outcome, oracle: Outcome) -> str:
    return (
        f"{case.role.name} tags={dict(case.tags)} route={dict(case.route)} {case.call.operation} "
        f"{dict(case.call.body)}: guard {guard}, iam-simulate {oracle}"
    )


def test_the_guard_and_the_oracle_read_the_same_roles(run: Run) -> None:
    assert set(run.guard_roles) == set(template_roles())


def test_the_guard_decides_as_iam_simulate_on_every_request(run: Run) -> None:
    compared = [case for case in run.cases if case.call.limit is None]
    assert len(compared) >= MIN_REQUESTS
    disagreements = []
    for case in compared:
        guard, oracle = run.guard(case), run.oracle(case)
        if case.call.unmodelled:
            # The guard refuses what it does not model: only the verdict is comparable.
            guard, oracle = Outcome(guard.allowed), Outcome(oracle.allowed)
        if guard != oracle:
            disagreements.append(_describe(case, guard, oracle))
    assert disagreements == [], _report(disagreements)


def test_where_the_guard_asks_about_a_start_key_it_is_only_stricter(run: Run) -> None:
    limited = [case for case in run.cases if case.call.limit == generator.START_KEY]
    assert limited
    stricter = 0
    for case in limited:
        guard, aws = run.guard(case), run.oracle(case)
        # The guard's own questions (the start key's partition keys in
        # dynamodb:LeadingKeys) are judged as iam-simulate judges them...
        assert guard == run.oracle(case, as_the_guard_asks=True), _describe(case, guard, aws)
        # ...and it never allows what AWS refuses.
        assert aws.allowed or not guard.allowed, _describe(case, guard, aws)
        stricter += aws.allowed and not guard.allowed
    # The difference is real (a tenant's index query with another tenant's ticket as its start key).
    assert stricter > 0


def test_the_oracle_uses_every_key_of_every_question(run: Run) -> None:
    """A key iam-simulate drops as not applicable to the action is one AWS does
    not send for it either: the generated questions would be wrong."""
    ignored = {
        (asked, key)
        for asked, verdict in run.verdicts.items()
        for key in verdict.ignored
        if key.lower().startswith(("dynamodb:", "aws:resourcetag/"))
    }
    assert ignored == set()


def test_the_requests_cover_what_the_issue_names(run: Run) -> None:
    roles = {case.role.name for case in run.cases}
    assert roles == set(template_roles())
    tenant_cases = [case for case in run.cases if case.role.name == "TenantAccessRole"]
    assert {tuple(sorted(case.tags.items())) for case in tenant_cases} == {
        tuple(sorted(tags.items())) for tags in generator.TAG_SETS
    }
    pairs = {(tuple(sorted(case.tags.items())), tuple(sorted(case.route.items()))) for case in tenant_cases}
    assert len(pairs) == len(generator.TAG_SETS) * len({tuple(sorted(c.route.items())) for c in run.cases})
    vpces = {case.route.get(generator.SOURCE_VPCE) for case in run.cases}
    assert None in vpces
    assert generator.WRONG in vpces
    assert len(vpces) >= 3
    operations = {case.call.operation for case in run.cases}
    used = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems"}
    never = {"Scan", "DescribeTable", "DeleteTable", "BatchGetItem", "TransactGetItems", "ExecuteStatement"}
    streams = {"DescribeStream", "GetShardIterator", "GetRecords", "ListStreams"}
    assert used | never | streams <= operations
    multi = [
        case
        for case in run.cases
        if any(len(q.context.get("dynamodb:LeadingKeys", ())) > 1 for q in case.call.questions)
    ]
    assert multi
    index = [case for case in run.cases if any(q.resource == generator.INDEX_ARN for q in case.call.questions)]
    assert index
    outcomes = [run.oracle(case) for case in tenant_cases]
    assert any(outcome.allowed for outcome in outcomes)
    assert any(outcome.explicit for outcome in outcomes)
    assert any(not outcome.allowed and not outcome.explicit for outcome in outcomes)


def test_tenant_credentials_on_the_delivery_sides_items_are_compared_both_ways(run: Run) -> None:
    """Among the compared requests: a tenant's own credentials, through the stack's
    endpoint, allowed to set the redelivery mark of its own delivery record and
    explicitly refused any other write of it or of its delivery rate counters."""
    mark_allowed = refused = 0
    for case in run.cases:
        (question, *_) = case.call.questions
        pk = (question.context.get("dynamodb:LeadingKeys") or ("",))[-1]
        tenant = case.tags.get("TenantId")
        own = tenant is not None and pk.startswith(f"TENANT#{tenant}|")
        if case.role.name != "TenantAccessRole" or not own or not pk.endswith(("#DELIVERIES", "#RATE")):
            continue
        if case.route.get(generator.SOURCE_VPCE) in (None, generator.WRONG):
            continue
        outcome = run.oracle(case)
        attributes = set(question.context.get("dynamodb:Attributes", ()))
        mark_only = attributes == {"pk", "sk", "redeliver_requested_at"} and pk.endswith("#DELIVERIES")
        if question.action == "dynamodb:UpdateItem" and mark_only:
            assert outcome.allowed, _describe(case, run.guard(case), outcome)
            mark_allowed += 1
        elif question.action not in ("dynamodb:GetItem", "dynamodb:Query"):
            assert not outcome.allowed, _describe(case, run.guard(case), outcome)
            assert outcome.explicit, _describe(case, run.guard(case), outcome)
            refused += 1
    assert mark_allowed >= 4
    assert refused >= 20


def test_tenant_credentials_on_the_dedicated_tables_are_compared_both_ways(run: Run) -> None:
    """Among the compared requests: tenant credentials through the stack's endpoint
    on a dedicated table (and its GSI1), allowed for the table's own tenant under its
    prefix, refused for every other tenant (1 on 10's table and 10 on 1's, whatever
    the keys), and on a table whose tag names another tenant than its name or none."""
    allowed: set[tuple[str, str]] = set()
    refused: set[tuple[str, str]] = set()
    for case in run.cases:
        tenant = case.tags.get("TenantId")
        if case.role.name != "TenantAccessRole" or tenant is None or case.call.limit is not None:
            continue
        if case.route.get(generator.SOURCE_VPCE) in (None, generator.WRONG):
            continue
        for question in case.call.questions:
            table = question.resource.removeprefix(generator.table_arn("")).split("/")[0]
            if (
                table not in generator.DEDICATED_TAGS
                or not question.action.startswith("dynamodb:")
                or ("/stream/" in question.resource)
            ):
                continue
            owner = generator.DEDICATED_TAGS[table].get("TenantId")
            verdict = run.verdicts[question_key(case, question)]
            if owner == tenant:
                pks = question.context.get("dynamodb:LeadingKeys", ())
                own = bool(pks) and all(pk.startswith(f"TENANT#{tenant}|") for pk in pks)
                (allowed if verdict.result == "Allowed" else refused).add((tenant, "own" if own else "other"))
                if not own:
                    assert verdict.result != "Allowed", _describe(case, run.guard(case), run.oracle(case))
            else:
                assert verdict.result != "Allowed", _describe(case, run.guard(case), run.oracle(case))
                refused.add((tenant, f"table of {owner}"))
    assert {("1", "own"), ("10", "own")} <= allowed
    assert {("1", "table of 10"), ("10", "table of 1"), ("a", "table of a-b"), ("1", "table of None")} <= refused
