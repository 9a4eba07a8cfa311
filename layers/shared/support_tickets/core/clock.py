"""Timestamps as the API shows them: ISO 8601, UTC, milliseconds, ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
