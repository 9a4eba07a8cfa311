"""Which URLs a webhook may point at (docs/webhooks.md, "URLs").

Judged at registration and again before every delivery attempt (DNS can
change in between). Deployed, only ``https://`` URLs whose host resolves, and
only to public addresses; the local stack (``make dev``) also admits
``http://127.0.0.1:<port>`` receivers. The resolver is a parameter, so tests
never touch the network.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from support_tickets.core.errors import InvalidWebhookUrl

MAX_URL_LENGTH: Final = 2048
LOCAL_HTTP_HOST: Final = "127.0.0.1"
# Names that never point anywhere public, whatever a resolver says.
_LOCAL_NAMES: Final = ("localhost", ".localhost", ".local", ".internal", ".localdomain", ".home.arpa")
# A DNS name: labels of letters, digits and "-" (IDNs in their xn-- form).
_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# Every form inet_aton accepts: 1 to 4 parts, each decimal, octal (0…) or hex (0x…).
_INET_ATON_PART: Final = re.compile(r"0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*")
# IPv6 ranges that carry an IPv4 address, judged by that address.
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL: Final = ipaddress.ip_network("64:ff9b:1::/48")
_SIX_TO_FOUR: Final = ipaddress.ip_network("2002::/16")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Iterable[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (``getaddrinfo``, TCP)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise InvalidWebhookUrl("The URL's host does not resolve.") from exc
    return [str(info[4][0]) for info in found]


@dataclass(frozen=True)
class CheckedUrl:
    """A URL that passed: as given, its host and port, and the addresses it resolved to."""

    url: str
    host: str
    port: int
    addresses: tuple[str, ...]


def _refuse(reason: str) -> InvalidWebhookUrl:
    return InvalidWebhookUrl(details=[{"field": "url", "message": reason}])


def _inet_aton_part(text: str) -> int:
    if text.startswith("0x"):
        return int(text[2:] or "0", 16)
    return int(text, 8) if text.startswith("0") else int(text)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver would make of a numeric host in any of
    inet_aton's forms (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(part) for part in parts):
        return None
    *leading, last = [_inet_aton_part(part) for part in parts]
    last_bytes = 5 - len(parts)  # the last part fills the bytes the others leave
    if any(value > 255 for value in leading) or last >= 256**last_bytes:
        return None
    number = 0
    for value in leading:
        number = number * 256 + value
    return ipaddress.IPv4Address(number * 256**last_bytes + last)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    # IPv4-compatible (::a.b.c.d, deprecated): anything in ::/96 but :: and ::1.
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address))
    return None


def is_public(address: Address) -> bool:
    """Whether an address is a public unicast one (never loopback, private,
    link-local, unique-local, shared, reserved, multicast or unspecified);
    an IPv6 address that embeds an IPv4 one is judged by that one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return is_public(embedded)
        if address in _NAT64_LOCAL:
            return False
    return address.is_global and not address.is_multicast and not address.is_reserved


def _literal(host: str, bracketed: bool) -> Address | None:
    """The address a numeric host stands for (IPv6 in brackets, IPv4 in any inet_aton form)."""
    if bracketed:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise _refuse("is not a valid IPv6 address") from exc
    return _inet_aton(host)


def check_webhook_url(
    url: object, *, resolve: Resolver = system_resolver, allow_local_http: bool = False
) -> CheckedUrl:
    """``url`` if a webhook may point at it, else :class:`InvalidWebhookUrl`
    (400 ``INVALID_WEBHOOK_URL``) with the reason in its details."""
    if not isinstance(url, str) or not url:
        raise _refuse("must be a URL")
    if len(url) > MAX_URL_LENGTH:
        raise _refuse(f"must be at most {MAX_URL_LENGTH} characters")
    if any(not 0x21 <= ord(char) <= 0x7E for char in url) or "\\" in url:
        raise _refuse("must be printable ASCII without spaces or backslashes (IDNs in their xn-- form)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _refuse("is not a valid URL (host or port)") from exc
    if "@" in parts.netloc:
        raise _refuse("must not contain a user name or password")
    if "#" in url:
        raise _refuse("must not have a fragment")
    host = (parts.hostname or "").lower()
    bracketed = parts.netloc.startswith("[")
    if not host:
        raise _refuse("must have a host")
    if port == 0:
        raise _refuse("the port must be 1-65535")
    scheme = parts.scheme.lower()
    if scheme == "http" and allow_local_http:
        if bracketed or host != LOCAL_HTTP_HOST or port is None:
            raise _refuse(f"http:// is accepted only as http://{LOCAL_HTTP_HOST}:<port> (local stack)")
        return CheckedUrl(url, host, port, (LOCAL_HTTP_HOST,))
    if scheme != "https":
        raise _refuse("must be https://")
    return CheckedUrl(url, host, port or 443, _public_addresses(host, bracketed, port or 443, resolve))


def _public_addresses(host: str, bracketed: bool, port: int, resolve: Resolver) -> tuple[str, ...]:
    """Every address ``host`` stands for, each public; else :class:`InvalidWebhookUrl`."""
    literal = _literal(host, bracketed)
    if literal is not None:
        if not is_public(literal):
            raise _refuse("must not point at a loopback, private, link-local or reserved address")
        return (str(literal),)
    if ":" in host or host.endswith("."):
        raise _refuse("is not a valid host")
    if host == _LOCAL_NAMES[0] or host.endswith(_LOCAL_NAMES[1:]):
        raise _refuse("must not point at a local name")
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise _refuse("must have a public DNS name or address as its host")
    addresses = tuple(resolve(host, port))
    if not addresses:
        raise _refuse("the host does not resolve")
    for text in addresses:
        try:
            address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise _refuse("the host resolves to something that is not an address") from exc
        if not is_public(address):
            raise _refuse("the host resolves to a loopback, private, link-local or reserved address")
    return addresses
