"""Time-ordered identifiers: ticket ids sort by creation time.

The ULID layout: 48-bit milliseconds + 80 random bits, Crockford base32, 26 characters."""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(now_ms: int | None = None) -> str:
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    value = (millis & ((1 << 48) - 1)) << 80 | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
