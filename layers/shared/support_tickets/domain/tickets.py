"""Domain operations: what each route does, for a caller, over the repositories.

Handlers call these and nothing else; these decide (a suspended tenant,
admin-only routes, ``If-Match``, idempotent creation) and leave storage to the
repositories.

Every operation starts at :func:`~support_tickets.domain.tenancy.table_for`, which refuses a suspended tenant
(``403 TENANT_SUSPENDED``) from its tenant record, read through the
container's cache (:mod:`support_tickets.data.tenant_registry`): a warm request
adds no DynamoDB call, and a suspension or a reactivation reaches every
container within ``TENANT_CONFIG_TTL_SECONDS`` (30 s).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from support_tickets.core.digits import DIGITS
from support_tickets.core.errors import ApiError, Conflict, Unavailable, ValidationFailed
from support_tickets.core.identity import Caller
from support_tickets.core.keys import TicketStatus, idempotency_pk
from support_tickets.core.models import (
    AddCommentRequest,
    AggregatesResponse,
    AuditPage,
    BatchStatusRequest,
    BatchStatusResponse,
    Comment,
    CreateTicketRequest,
    Ticket,
    TicketPage,
    TicketWithComments,
    UpdateTicketRequest,
)
from support_tickets.data.table import IdempotencyStore, TenantTable
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain.tenancy import table_for  # every operation starts there

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_dynamodb import DynamoDBClient

    from support_tickets.data.audit_repository import AuditRepository
    from support_tickets.data.comment_repository import CommentRepository

# Each function runs one of these operations: the repositories only some of
# them use are imported where they are used, so a cold start loads only its own.

DEFAULT_PAGE_SIZE = 25
MAX_PAGE_SIZE = 100
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
IDEMPOTENCY_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")
# HTTP's optional whitespace is spaces and tabs; the version is ASCII digits (core.digits).
_IF_MATCH = re.compile(rf'^[ \t]*(?:W/)?"?({DIGITS}{{1,18}})"?[ \t]*$')


def repository_for(caller: Caller) -> TicketRepository:
    return TicketRepository(table_for(caller))


def create_ticket(
    caller: Caller,
    request: CreateTicketRequest,
    idempotency_key: str | None = None,
    lambda_context: LambdaContext | None = None,
) -> Ticket:
    """Create a ticket; with an ``Idempotency-Key``, the same user, key and body
    give the same ticket (no second write) for 24 hours.

    The key is scoped to the user: another user of the tenant sending the same
    key creates their own ticket, never receives this one. A replay answers
    what a fresh read of the ticket answers: its current state, or 404 once
    it was deleted. So the record keeps the ticket's id and nothing of its
    text (no title, no description: a deleted ticket's words do not outlive it
    in a record nobody can find from the ticket), and the body only as
    Powertools' hash of it (``payload_validation_jmespath``). The record lives
    under one of the tenant's ``TENANT#<t>|IDEMPOTENCY#<n>`` partitions (by user
    and key) and is written through the tenant-scoped client, so keys never
    collide across tenants and a busy tenant's records spread over many keys.

    The ticket's put completes the record in the same transaction
    (:class:`~support_tickets.data.table.IdempotencyStore`): an invocation killed after
    it, or whose answer to it was lost, leaves the record that answers the
    client's retry (API.md: 502/504 and 503 ``UNAVAILABLE``, "retry it with the
    same ``Idempotency-Key``") with that ticket, never a second one."""
    repository = repository_for(caller)
    if idempotency_key is None:
        return repository.create_ticket(request, created_by=caller.username)
    if not IDEMPOTENCY_KEY_PATTERN.fullmatch(idempotency_key):
        raise ValidationFailed(details=[{"field": "Idempotency-Key", "message": "1-255 printable ASCII characters"}])
    # Powertools' idempotency is imported here, not at module level: only this
    # route needs it, and it is off the cold-start path of the other eight.
    from aws_lambda_powertools.shared.json_encoder import Encoder
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyPersistenceLayerError,
        IdempotencyValidationError,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS
    from aws_lambda_powertools.utilities.idempotency.serialization.custom_dict import CustomDictSerializer

    store = IdempotencyStore(repository.table)
    persistence = DynamoDBPersistenceLayer(
        table_name=repository.table_name,
        key_attr="pk",
        sort_key_attr="sk",
        static_pk_value=idempotency_pk(caller.tenant_id, f"{caller.username}\x1f{idempotency_key}"),
        boto3_client=cast("DynamoDBClient", store),
    )
    config = idempotency_config()
    if lambda_context is not None:
        # Lets an in-progress record expire with the invocation that wrote it.
        config.register_lambda_context(lambda_context)
    # Records written before they kept only the id held the whole ticket: its id is read all the same.
    serializer = CustomDictSerializer(to_dict=lambda ticket_id: {"ticket_id": ticket_id}, from_dict=_ticket_id)

    def completed(ticket_id: str) -> dict[str, Any]:
        """The record completed with the ticket's id, as Powertools' ``save_success`` writes it."""
        response = json.dumps(serializer.to_dict(ticket_id), cls=Encoder, sort_keys=True)
        return store.completion(
            {
                persistence.status_attr: {"S": STATUS_CONSTANTS["COMPLETED"]},
                persistence.data_attr: {"S": response},
            }
        )

    @idempotent_function(  # type: ignore[untyped-decorator]
        data_keyword_argument="payload",
        persistence_store=persistence,
        config=config,
        output_serializer=serializer,
    )
    def create_once(payload: dict[str, Any]) -> str:
        created.append(repository.create_ticket(request, created_by=caller.username, completes=completed))
        return created[-1].ticket_id

    created: list[Ticket] = []
    try:
        ticket_id: str = create_once(payload=idempotency_payload(caller.username, idempotency_key, request))
    except IdempotencyValidationError as exc:
        raise Conflict("This Idempotency-Key was already used with a different body.") from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise Conflict("A request with this Idempotency-Key is still in progress.") from exc
    except IdempotencyPersistenceLayerError as exc:
        if isinstance(exc.__cause__, ApiError):
            raise exc.__cause__ from None  # already mapped by the repository (429, 503...)
        raise Unavailable() from exc
    if created:
        return created[-1]
    # A replay: answer what a read would (the ticket may have changed, or be gone: 404).
    return repository.get_ticket_summary(ticket_id)


def idempotency_config() -> IdempotencyConfig:
    """How Powertools reads an idempotent create's payload
    (:func:`idempotency_payload`): the user and the key name the record, the
    request is kept as a hash, to tell a retry from another body."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="[user, key]",
        payload_validation_jmespath="request",
        expires_after_seconds=IDEMPOTENCY_TTL_SECONDS,
    )


def idempotency_payload(username: str, idempotency_key: str, request: CreateTicketRequest) -> dict[str, Any]:
    """What Powertools hashes of an idempotent create (:func:`idempotency_config`)."""
    return {"user": username, "key": idempotency_key, "request": asdict(request)}


def _ticket_id(stored: dict[str, Any]) -> str:
    """The ticket id an idempotency record names ("" for a record that names none: not found)."""
    ticket_id = stored.get("ticket_id")
    return ticket_id if isinstance(ticket_id, str) else ""


def list_tickets(
    caller: Caller, status: TicketStatus, resolver: str | None, limit: int, cursor: str | None
) -> TicketPage:
    return repository_for(caller).list_tickets_by_status(status, resolver, limit, cursor)


def _comments(table: TenantTable) -> CommentRepository:
    from support_tickets.data.comment_repository import CommentRepository

    return CommentRepository(table)


def _audit(table: TenantTable) -> AuditRepository:
    from support_tickets.data.audit_repository import AuditRepository

    return AuditRepository(table)


def get_ticket(caller: Caller, ticket_id: str, limit: int, cursor: str | None) -> TicketWithComments:
    return _comments(table_for(caller)).get_ticket_with_comments(ticket_id, limit, cursor)


def get_ticket_summary(caller: Caller, ticket_id: str) -> Ticket:
    return repository_for(caller).get_ticket_summary(ticket_id)


def parse_if_match(value: str | None) -> int | None:
    """``If-Match: 3`` (or ``"3"``, ``W/"3"``) → 3; absent → None."""
    if value is None:
        return None
    match = _IF_MATCH.fullmatch(value)
    if match is None:
        raise ValidationFailed(details=[{"field": "If-Match", "message": "must be the ticket's version number"}])
    return int(match.group(1))


def update_ticket(caller: Caller, ticket_id: str, request: UpdateTicketRequest, if_match: str | None) -> Ticket:
    return repository_for(caller).update_ticket(
        ticket_id, request.changes(), parse_if_match(if_match), actor=caller.username
    )


def add_comment(caller: Caller, ticket_id: str, request: AddCommentRequest) -> Comment:
    return _comments(table_for(caller)).add_comment(ticket_id, author=caller.username, body=request.body)


def change_status(caller: Caller, request: BatchStatusRequest) -> BatchStatusResponse:
    return repository_for(caller).change_status(request.ticket_ids, request.status, actor=caller.username)


def delete_ticket(caller: Caller, ticket_id: str, lambda_context: LambdaContext | None = None) -> None:
    """The ticket is gone when this returns; its comments within the request's
    budget, or soon after by the audit-trail function (``TicketRepository.delete_ticket``)."""
    repository = repository_for(caller)
    caller.require_admin()
    time_left = None if lambda_context is None else lambda: lambda_context.get_remaining_time_in_millis() / 1000
    repository.delete_ticket(ticket_id, actor=caller.username, time_left=time_left)


def get_aggregates(caller: Caller) -> AggregatesResponse:
    table = table_for(caller)
    caller.require_admin()
    from support_tickets.data.aggregate_repository import AggregateRepository

    return AggregateRepository(table).get_aggregates()


def get_ticket_history(caller: Caller, ticket_id: str, limit: int, cursor: str | None) -> AuditPage:
    return _audit(table_for(caller)).ticket_history(ticket_id, limit, cursor)


def get_audit_trail(caller: Caller, start: str | None, end: str | None, limit: int, cursor: str | None) -> AuditPage:
    table = table_for(caller)
    caller.require_admin()
    return _audit(table).tenant_trail(start, end, limit, cursor, now=datetime.now(UTC))
