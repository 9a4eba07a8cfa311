"""Domain errors, each with its HTTP status and API.md error code.

`api` maps them to responses in one place, so handlers never build error bodies."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

# A 400 names at most MAX_DETAILS of the request's problems, each field path and
# message cut to a bounded length as JSON writes it, and says in its message
# when it named fewer than it found. Without it a 64 KiB body of thirty thousand
# wrong items answered thirty thousand details (2 MB), and a field name of 60 KB
# came back whole: an error body is never larger than the request that caused
# it (whose bearer token alone is over 700 bytes), and at most about 3 KiB.
MAX_DETAILS: Final = 10
MAX_FIELD_CHARS: Final = 64
MAX_MESSAGE_CHARS: Final = 160
_CUT: Final = "..."


class ApiError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "INTERNAL_ERROR"
    default_message: ClassVar[str] = "Internal error."

    def __init__(self, message: str | None = None, *, details: Any = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.details = details

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def headers(self) -> dict[str, str]:
        return {}


def _clipped(text: object, limit: int) -> str:
    """``text`` if JSON writes it in at most ``limit`` characters; else its longest
    prefix that fits with ``...`` after it (a non-ASCII character is written as
    ``\\uXXXX``, up to 12 characters, so characters alone would not bound it)."""
    text = str(text)
    if len(json.dumps(text)) - 2 <= limit:
        return text
    kept: list[str] = []
    room = limit - len(_CUT)
    for character in text:
        room -= len(json.dumps(character)) - 2
        if room < 0:
            break
        kept.append(character)
    return "".join(kept) + _CUT


def bounded_details(details: Sequence[Mapping[str, object]]) -> list[dict[str, str]]:
    """The first :data:`MAX_DETAILS` ``{field, message}`` details, each bounded."""
    return [
        {"field": _clipped(detail.get("field", ""), MAX_FIELD_CHARS),
         "message": _clipped(detail.get("message", ""), MAX_MESSAGE_CHARS)}
        for detail in details[:MAX_DETAILS]
    ]  # fmt: skip


class ValidationFailed(ApiError):
    """A 400 whose ``details`` are ``{field, message}`` pairs, bounded (:func:`bounded_details`)."""

    status = 400
    code = "VALIDATION_ERROR"
    default_message = "The request is not valid."

    def __init__(self, message: str | None = None, *, details: Sequence[Mapping[str, object]] | None = None) -> None:
        found = list(details or ())
        if len(found) > MAX_DETAILS:
            message = (
                f"{message or self.default_message} It has {len(found)} problems; "
                f"details lists the first {MAX_DETAILS}."
            )
        shown = None if details is None else bounded_details(found)
        super().__init__(message and _clipped(message, MAX_MESSAGE_CHARS), details=shown)


class InvalidJson(ApiError):
    status = 400
    code = "INVALID_JSON"
    default_message = "The request body is not valid JSON."


class InvalidCursor(ApiError):
    status = 400
    code = "INVALID_CURSOR"
    default_message = "The cursor is not valid for this query."


class InvalidWebhookUrl(ApiError):
    status = 400
    code = "INVALID_WEBHOOK_URL"
    default_message = "Webhook URLs must be https:// and point at a public address."


class Unauthorized(ApiError):
    status = 401
    code = "UNAUTHORIZED"
    default_message = "Missing or invalid bearer token."


class Forbidden(ApiError):
    status = 403
    code = "FORBIDDEN"
    default_message = "You are not allowed to do this."


class TenantSuspended(ApiError):
    status = 403
    code = "TENANT_SUSPENDED"
    default_message = "This tenant is suspended; contact your provider."


class TicketNotFound(ApiError):
    status = 404
    code = "TICKET_NOT_FOUND"
    default_message = "Ticket not found."


class WebhookNotFound(ApiError):
    status = 404
    code = "WEBHOOK_NOT_FOUND"
    default_message = "Webhook not found."


class DeliveryNotFound(ApiError):
    status = 404
    code = "DELIVERY_NOT_FOUND"
    default_message = "Delivery not found."


class TooManyWebhooks(ApiError):
    status = 409
    code = "TOO_MANY_WEBHOOKS"
    default_message = "This tenant already has the most webhooks it may have (10)."


class Conflict(ApiError):
    status = 409
    code = "CONFLICT"
    default_message = "A concurrent change won; nothing was changed."


class VersionMismatch(ApiError):
    status = 412
    code = "VERSION_MISMATCH"
    default_message = "If-Match does not match the ticket's current version."


class PayloadTooLarge(ApiError):
    status = 413
    code = "PAYLOAD_TOO_LARGE"
    default_message = "The request body exceeds 64 KiB."


class _RetryLater(ApiError):
    retry_after_seconds: ClassVar[int] = 1

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_seconds)}


class Throttled(_RetryLater):
    status = 429
    code = "THROTTLED"
    default_message = "Too many requests; retry later."


class QuotaExceeded(_RetryLater):
    """API Gateway's answer (a gateway response, before any function) when a
    tenant used its tier's daily quota; here for the OpenAPI document."""

    status = 429
    code = "QUOTA_EXCEEDED"
    default_message = "This tenant used its daily request quota; it resets at 00:00 UTC."


class Unavailable(_RetryLater):
    status = 503
    code = "UNAVAILABLE"
    default_message = "A dependency is unavailable; retry later."


class TenantMoving(_RetryLater):
    """A write while the tenant's data switches tables (``ops.move``): for the
    few seconds of the switch, reads go on and writes wait."""

    status = 503
    code = "TENANT_MOVING"
    default_message = "This tenant's data is moving; retry the write in a few seconds."
    retry_after_seconds = 2
    # A request of a tenant this cell does not serve (arriving from another cell, or moved out to
    # one): reads too. The text of template.yaml's INVALID_API_KEY gateway response, which says the same.
    cell_message: ClassVar[str] = "This tenant is moving; retry in a few seconds."
