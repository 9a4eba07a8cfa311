"""Domain errors. Each carries its HTTP status and API.md error code; `api` maps
them to responses in one place, so handlers never build error bodies."""

from __future__ import annotations

from typing import Any, ClassVar


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


class ValidationFailed(ApiError):
    status = 400
    code = "VALIDATION_ERROR"
    default_message = "The request is not valid."


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
